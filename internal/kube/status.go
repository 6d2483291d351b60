package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StatusOwner is one writer of a kind's status: the field manager it writes
// under and the parts of the status it owns, which no other writer touches
// (owners.go declares every writer; docs/architecture.md has the table).
// Every writer writes the same way, by server-side apply of its own parts
// only: the API server merges status.conditions by type, so each writer
// owns its conditions and no more, and no writer's copy, however stale,
// can write another's part back older. A stale copy can still write the
// writer's own part back older unless the writer is Locked.
type StatusOwner struct {
	// Manager is the field manager the writer applies under.
	Manager string
	// Fields are the top-level status fields it owns, by JSON name.
	Fields []string
	// Conditions are the types of the status.conditions it owns.
	Conditions []string
	// Locked makes each apply carry the resourceVersion of the copy it was
	// computed from, so that it fails with a conflict
	// (apierrors.IsConflict) when the object changed since (by any writer):
	// for a writer whose part must not move back when its copy is behind
	// (one that runs on every replica, or one that records which
	// generation of the spec it saw). The caller reads again and retries.
	Locked bool
}

// Apply makes the parts of obj's status that o owns what want says, by
// server-side apply under o.Manager. want is the status as o would have it
// (a changed copy of obj's, say); only o's parts are read from it, and
// those it leaves out or empty are removed. Nothing is written when o's
// parts already say the same; it reports whether it wrote. An object
// deleted meanwhile is not an error.
func (o StatusOwner) Apply(ctx context.Context, c client.Client, obj client.Object, want any) (bool, error) {
	haveStatus, err := statusOf(obj)
	if err != nil {
		return false, err
	}
	wantStatus, err := toMap(want)
	if err != nil {
		return false, fmt.Errorf("status of %s: %w", obj.GetName(), err)
	}
	have, mine := o.owned(haveStatus), o.owned(wantStatus)
	if apiequality.Semantic.DeepEqual(have, mine) {
		return false, nil
	}
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return false, err
	}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	if o.Locked {
		u.SetResourceVersion(obj.GetResourceVersion())
	}
	if len(mine) > 0 {
		u.Object["status"] = mine
	}
	err = c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(o.Manager), client.ForceOwnership)
	if err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if err := o.removeLeftovers(ctx, c, u, mine); err != nil {
		return true, err
	}
	return true, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj)
}

// removeLeftovers removes, by a JSON patch that first tests that each is
// still where it was, the parts of o's that the apply left although want
// lacks them: parts that a writer from before server-side apply (a merge
// patch, which the API server records as an Update) still co-owns. Once o
// has applied them alone, the apply itself removes them, and this writes
// nothing.
func (o StatusOwner) removeLeftovers(ctx context.Context, c client.Client, u *unstructured.Unstructured, want map[string]any) error {
	status, _, err := unstructured.NestedMap(u.Object, "status")
	if err != nil {
		return err
	}
	var ops []map[string]any
	conds, _, _ := unstructured.NestedSlice(status, "conditions")
	wanted := conditionTypes(want)
	// Back to front, so that each removal leaves the indexes of the ones
	// before it as they are.
	for i := len(conds) - 1; i >= 0; i-- {
		t := conditionType(conds[i])
		if slices.Contains(o.Conditions, t) && !slices.Contains(wanted, t) {
			path := fmt.Sprintf("/status/conditions/%d", i)
			ops = append(ops, map[string]any{"op": "test", "path": path + "/type", "value": t}, map[string]any{"op": "remove", "path": path})
		}
	}
	for _, f := range o.Fields {
		if _, left := status[f]; left {
			if _, ok := want[f]; !ok {
				ops = append(ops, map[string]any{"op": "remove", "path": "/status/" + f})
			}
		}
	}
	if len(ops) == 0 {
		return nil
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(c.Status().Patch(ctx, u, client.RawPatch(types.JSONPatchType, patch)))
}

// owned is the part of status that o owns, as it would be applied: its
// fields, and its conditions in the order status has them.
func (o StatusOwner) owned(status map[string]any) map[string]any {
	out := map[string]any{}
	for _, f := range o.Fields {
		if v, ok := status[f]; ok {
			out[f] = v
		}
	}
	conds, _ := status["conditions"].([]any)
	var mine []any
	for _, c := range conds {
		if slices.Contains(o.Conditions, conditionType(c)) {
			mine = append(mine, c)
		}
	}
	if len(mine) > 0 {
		out["conditions"] = mine
	}
	return out
}

func conditionTypes(status map[string]any) []string {
	conds, _ := status["conditions"].([]any)
	out := make([]string, len(conds))
	for i, c := range conds {
		out[i] = conditionType(c)
	}
	return out
}

func conditionType(c any) string {
	m, _ := c.(map[string]any)
	t, _ := m["type"].(string)
	return t
}

// statusOf is obj's status as the API server's JSON has it.
func statusOf(obj client.Object) (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", obj.GetName(), err)
	}
	status, _ := m["status"].(map[string]any)
	return status, nil
}

func toMap(v any) (map[string]any, error) {
	if v == nil {
		return nil, errors.New("no status")
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(v)
}

// Owns reports whether part of a status is o's: a top-level field by its
// JSON name, or a condition written conditions[<type>].
func (o StatusOwner) Owns(part string) bool {
	if t, ok := strings.CutPrefix(part, "conditions["); ok {
		return slices.Contains(o.Conditions, strings.TrimSuffix(t, "]"))
	}
	return slices.Contains(o.Fields, part)
}
