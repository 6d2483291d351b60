package testenv

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StatusFieldsByManager reads obj's managedFields: for each field manager,
// the parts of the status it owns, each a top-level field by its JSON name
// or a condition written conditions[<type>], as kube.StatusOwner.Owns
// takes them.
func StatusFieldsByManager(obj client.Object) (map[string][]string, error) {
	out := map[string][]string{}
	for _, e := range obj.GetManagedFields() {
		if e.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Status map[string]map[string]any `json:"f:status"`
		}
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil {
			return nil, fmt.Errorf("managedFields of %s: %w", e.Manager, err)
		}
		for key, sub := range fields.Status {
			name, ok := strings.CutPrefix(key, "f:")
			switch {
			case !ok:
				continue // ".": the status itself
			case name != "conditions":
				out[e.Manager] = append(out[e.Manager], name)
				continue
			}
			for k := range sub {
				var cond struct{ Type string }
				if item, ok := strings.CutPrefix(k, "k:"); ok && json.Unmarshal([]byte(item), &cond) == nil {
					out[e.Manager] = append(out[e.Manager], "conditions["+cond.Type+"]")
				}
			}
		}
		sort.Strings(out[e.Manager])
	}
	return out, nil
}
