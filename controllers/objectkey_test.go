package controllers

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// stringKeys are the ways an object key was spelled as a "ns/name" string
// and split again: joining a namespace and a name with "/", or cutting a
// key at "/".
var stringKeys = regexp.MustCompile(`(Namespace|GetNamespace\(\)) *\+ *"/" *\+|strings\.Cut\([A-Za-z.]+, "/"\)`)

// TestObjectsKeyedByType: the controllers, the scan and the webhooks key
// exceptions and other objects by types.NamespacedName (or objectKey),
// never by a "ns/name" string they join and split again.
func TestObjectsKeyedByType(t *testing.T) {
	for _, dir := range []string{".", "background", filepath.Join("..", "webhooks")} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range stringKeys.FindAll(src, -1) {
				t.Errorf("%s: %q keys an object by a string; use types.NamespacedName", f, m)
			}
		}
	}
}
