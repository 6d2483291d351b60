package admissionpolicy

import (
	"encoding/json"
	"fmt"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// The parameters of the compiled policies: one PodSecurityParams object per
// namespace, named ParamsName, holding the PolicyExceptions in force there
// (its own, and those of the cluster exceptions namespace that reach it).
// Only exceptions that are Ready, judged by the engine against the policies'
// guardrails, are written; an exception that expires, is deleted or stops
// being permitted is removed by whoever writes the parameters.
const (
	ParamsGroup      = "policy.podsieve.dev"
	ParamsVersion    = "v1alpha1"
	ParamsAPIVersion = ParamsGroup + "/" + ParamsVersion
	ParamsKind       = "PodSecurityParams"
	ParamsResource   = "podsecurityparams"
	ParamsName       = "podsieve"
)

// Params is the spec of a PodSecurityParams object.
type Params struct {
	Exceptions []ParamException `json:"exceptions"`
}

// ParamException is one PolicyException in force, compiled: the rules it
// waives by name (its ruleNames globs resolved against the policies), its
// match, and its entries.
type ParamException struct {
	// Source is exception/<namespace>/<name>, as podsieve reports it.
	Source    string                `json:"source"`
	Targets   []ParamTarget         `json:"targets"`
	Names     *globSet              `json:"names,omitempty"`
	Kinds     []string              `json:"kinds,omitempty"`
	Selector  *metav1.LabelSelector `json:"selector,omitempty"`
	WholeRule bool                  `json:"wholeRule,omitempty"`
	Entries   []ParamEntry          `json:"entries,omitempty"`
}

// ParamTarget is a rule an exception waives.
type ParamTarget struct {
	Policy string `json:"policy"`
	Rule   string `json:"rule"`
}

// ParamEntry is a compiled podSecurity entry of an exception.
type ParamEntry struct {
	Control string   `json:"control"`
	Field   string   `json:"field,omitempty"`
	Kinds   []string `json:"kinds,omitempty"`
	Names   *globSet `json:"names,omitempty"`
	Images  *globSet `json:"images,omitempty"`
	Values  *globSet `json:"values,omitempty"`
}

// CompileException compiles a PolicyException in force (Ready), which e is
// the engine's compilation of, for the policies it names.
func CompileException(pe *policyv1alpha1.PolicyException, e *engine.Exception, policy func(string) *engine.Policy) (*ParamException, error) {
	out := &ParamException{Source: e.Source.String(), WholeRule: e.WholeRule}
	for _, name := range e.Policies() {
		p := policy(name)
		if p == nil {
			return nil, fmt.Errorf("PolicyException %s/%s: policy %q is not in force", pe.Namespace, pe.Name, name)
		}
		for _, r := range p.Rules {
			if e.Targets(p.Name, r.Name) {
				out.Targets = append(out.Targets, ParamTarget{Policy: p.Name, Rule: r.Name})
			}
		}
	}
	if m := pe.Spec.Match; m != nil {
		if len(m.Names) > 0 {
			gs, err := compileGlobs(m.Names)
			if err != nil {
				return nil, fmt.Errorf("PolicyException %s/%s: spec.match.names: %w", pe.Namespace, pe.Name, err)
			}
			out.Names = &gs
		}
		for _, k := range m.Kinds {
			out.Kinds = append(out.Kinds, string(k))
		}
		out.Selector = m.Selector
	}
	for i, x := range pe.Spec.PodSecurity {
		entry := ParamEntry{Control: string(x.ControlName), Field: x.RestrictedField}
		for _, k := range x.ContainerKinds {
			entry.Kinds = append(entry.Kinds, string(k))
		}
		for _, l := range []struct {
			globs []string
			into  **globSet
			field string
		}{{x.ContainerNames, &entry.Names, "containerNames"}, {x.Images, &entry.Images, "images"}, {x.Values, &entry.Values, "values"}} {
			if len(l.globs) == 0 {
				continue
			}
			gs, err := compileGlobs(l.globs)
			if err != nil {
				return nil, fmt.Errorf("PolicyException %s/%s: spec.podSecurity[%d].%s: %w", pe.Namespace, pe.Name, i, l.field, err)
			}
			*l.into = &gs
		}
		out.Entries = append(out.Entries, entry)
	}
	return out, nil
}

// ParamsObject is the PodSecurityParams object of a namespace holding the
// exceptions, in the order given.
func ParamsObject(namespace string, exceptions []*ParamException) (*unstructured.Unstructured, error) {
	spec := Params{Exceptions: make([]ParamException, 0, len(exceptions))}
	for _, e := range exceptions {
		spec.Exceptions = append(spec.Exceptions, *e)
	}
	slices.SortFunc(spec.Exceptions, func(a, b ParamException) int {
		switch {
		case a.Source < b.Source:
			return -1
		case a.Source > b.Source:
			return 1
		}
		return 0
	})
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": m}}
	u.SetAPIVersion(ParamsAPIVersion)
	u.SetKind(ParamsKind)
	u.SetNamespace(namespace)
	u.SetName(ParamsName)
	u.SetLabels(map[string]string{ManagedByLabel: ManagedBy})
	return u, nil
}

// ParamsCRD is the CustomResourceDefinition of PodSecurityParams. Only
// podsieve writes them: no aggregated role grants them to namespace users,
// whose waivers go through PolicyExceptions and the guardrails.
func ParamsCRD() *apiextensionsv1.CustomResourceDefinition {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	strs := apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &str}}
	globs := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"any": {Type: "boolean"}, "exact": strs, "patterns": strs}}
	entry := apiextensionsv1.JSONSchemaProps{Type: "object", Required: []string{"control"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"control": str, "field": str, "kinds": strs, "names": globs, "images": globs, "values": globs}}
	target := apiextensionsv1.JSONSchemaProps{Type: "object", Required: []string{"policy", "rule"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"policy": str, "rule": str}}
	exception := apiextensionsv1.JSONSchemaProps{Type: "object", Required: []string{"source", "targets"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"source":    str,
		"targets":   {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &target}},
		"names":     globs,
		"kinds":     strs,
		"selector":  {Type: "object", XPreserveUnknownFields: ptr.To(true)},
		"wholeRule": {Type: "boolean"},
		"entries":   {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &entry}},
	}}
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: ParamsResource + "." + ParamsGroup, Labels: map[string]string{ManagedByLabel: ManagedBy}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: ParamsGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: ParamsResource, Singular: "podsecurityparams", Kind: ParamsKind, ListKind: ParamsKind + "List"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: ParamsVersion, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:        "object",
					Description: "PodSecurityParams holds the PolicyExceptions in force in its namespace, compiled by podsieve for its ValidatingAdmissionPolicies. Written by podsieve only.",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"apiVersion": str, "kind": str, "metadata": {Type: "object"},
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"exceptions": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &exception}},
						}},
					},
				}},
			}},
		},
	}
}
