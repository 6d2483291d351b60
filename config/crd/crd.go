// Package crd embeds the CustomResourceDefinitions that `make manifests`
// generates into bases/, for the commands that print them (podsieve
// compile prints the PodSecurityParams CRD its output needs).
package crd

import _ "embed"

// PodSecurityParams is the generated CRD of PodSecurityParams, as YAML.
//
//go:embed bases/policy.podsieve.dev_podsecurityparams.yaml
var PodSecurityParams []byte
