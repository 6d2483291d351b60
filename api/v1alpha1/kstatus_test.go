package v1alpha1_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// No controller runs in this suite: what kstatus says here is what Flux
// sees between a write and podsieve's judgement.
var _ = Describe("kstatus before podsieve has judged an object", func() {
	DescribeTable("a new object is InProgress, not Current",
		func(manifest string) {
			obj := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal([]byte(manifest), &obj.Object)).To(Succeed())
			Expect(k8s.Create(ctx, obj)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, obj))).To(Succeed()) })

			read := &unstructured.Unstructured{}
			read.SetGroupVersionKind(obj.GroupVersionKind())
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), read)).To(Succeed())
			// The schema's default: observedGeneration 0 until the
			// controller writes the generation it judged.
			Expect(read.Object).To(HaveKeyWithValue("status", HaveKeyWithValue("observedGeneration", BeNumerically("==", 0))))
			res, err := status.Compute(read)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Status).To(Equal(status.InProgressStatus), res.Message)
		},
		Entry("SecurityPolicy", "apiVersion: policy.podsieve.dev/v1alpha1\nkind: SecurityPolicy\nmetadata: {name: kstatus-new}\n"+
			"spec: {rules: [{name: b, podSecurity: {level: baseline}}]}\n"),
		Entry("PolicyException", "apiVersion: policy.podsieve.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: kstatus-new, namespace: default}\n"+
			"spec: {exceptions: [{policyName: p, ruleNames: ['*']}], podSecurity: [{controlName: Host Ports}]}\n"),
	)
})
