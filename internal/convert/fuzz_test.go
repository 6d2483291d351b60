package convert

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// FuzzConvert feeds arbitrary input to every converter: none may panic, and
// every object a converter writes must compile, whatever it was given.
func FuzzConvert(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	// Kyverno's CEL Pod Security library, when present
	// (testdata/kyverno-vpol/README.md): each policy, and all of them with
	// an exception, so that the recognised path is fuzzed too.
	if dir := os.Getenv("PODSIEVE_KYVERNO_VPOL"); dir != "" {
		lib, _ := filepath.Glob(filepath.Join(dir, "*", "*", "*.yaml"))
		var all [][]byte
		for _, file := range append(lib, "testdata/kyverno-vpol/exception.yaml") {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
			all = append(all, data)
		}
		f.Add(bytes.Join(all, []byte("\n---\n")))
	}
	f.Fuzz(checkConvert)
}

// checkConvert is FuzzConvert's check on one input.
func checkConvert(t *testing.T, data []byte) {
	{
		docs, _ := Read([]string{"-"}, bytes.NewReader(data))
		var results []*Result
		if res, err := Kyverno(docs, KyvernoOptions{ExceptionsNamespace: "podsieve-system"}); err == nil {
			results = append(results, res)
		}
		if res, err := PSP(docs, PSPOptions{EveryPolicyApplies: true}); err == nil {
			results = append(results, res)
		}
		res := &Result{}
		if nss, err := Namespaces(docs, res); err == nil {
			results = append(results, PSALabels(nss, nil, res))
		}
		for _, res := range results {
			for _, o := range res.Objects {
				switch obj := o.Object.(type) {
				case *policyv1alpha1.SecurityPolicy:
					if _, err := engine.CompilePolicy(obj); err != nil {
						t.Fatalf("SecurityPolicy %s does not compile: %v", obj.Name, err)
					}
				case *policyv1alpha1.PolicyException:
					if _, err := engine.CompileException(obj, "podsieve-system"); err != nil {
						t.Fatalf("PolicyException %s/%s does not compile: %v", obj.Namespace, obj.Name, err)
					}
				}
			}
		}
	}
}
