package synthetic

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TenantEntries is how many labels and how many annotations TenantMetadata
// writes for a maximal object: with a maximal exception's spec and the
// managed fields, the API server stores 1.48 MB of JSON, near the limit on
// a stored object (etcd's request limit, 1.5 MiB by default). The
// controllers' envtest creates such an exception.
const TenantEntries = 30_000

// TenantMetadata sets on m what a namespace editor may write into an
// object's metadata beside its name: n labels and n annotations with short
// keys and empty values (each a map entry in a decoded object for about ten
// bytes of request, the costliest way to spend the bytes), and a
// managed-fields entry naming each of them, as the API server records for
// whoever set them.
func TenantMetadata(m *metav1.ObjectMeta, n int) {
	m.Labels = make(map[string]string, n)
	m.Annotations = make(map[string]string, n)
	var fields strings.Builder
	fields.WriteString(`{"f:metadata":{"f:annotations":{".":{}`)
	for i := range n {
		k := fmt.Sprintf("a%04x", i)
		m.Annotations[k] = ""
		fmt.Fprintf(&fields, `,"f:%s":{}`, k)
	}
	fields.WriteString(`},"f:labels":{".":{}`)
	for i := range n {
		k := fmt.Sprintf("l%04x", i)
		m.Labels[k] = ""
		fmt.Fprintf(&fields, `,"f:%s":{}`, k)
	}
	fields.WriteString(`}}}`)
	m.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: "tenant", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "policy.podsieve.dev/v1alpha1",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields.String()),
	}}
}
