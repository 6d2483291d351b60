package engine

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func TestNewObject(t *testing.T) {
	privileged := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.25",
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}},
	}
	om := metav1.ObjectMeta{Namespace: "staging", Name: "web"}
	tests := []struct {
		name        string
		obj         runtime.Object
		kind        string
		wantMessage string // the deny line for the privileged container, "" when nothing fails
	}{
		{"deployment reports the template path", &appsv1.Deployment{ObjectMeta: om, Spec: appsv1.DeploymentSpec{Template: privileged}}, "Deployment",
			`Privileged Containers: container "app" (image nginx:1.25) sets spec.template.spec.containers[*].securityContext.privileged to true`},
		{"cronjob reports the job template path", &batchv1.CronJob{ObjectMeta: om, Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: privileged}}}}, "CronJob",
			`sets spec.jobTemplate.spec.template.spec.containers[*].securityContext.privileged to true`},
		{"pod reports its own path", &corev1.Pod{ObjectMeta: om, Spec: privileged.Spec}, "Pod",
			`sets spec.containers[*].securityContext.privileged to true`},
		{"replication controller without a template has nothing to refuse", &corev1.ReplicationController{ObjectMeta: om}, "ReplicationController", ""},
	}
	p := mustPolicy(t, "p", "exceptions: {}\n"+baselineRule)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := NewObject(tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			if o.Kind != tt.kind || o.Namespace != "staging" || o.Name != "web" {
				t.Errorf("object %s %s/%s, want %s staging/web", o.Kind, o.Namespace, o.Name, tt.kind)
			}
			res := p.Rules[0].Evaluate(o, nil)
			if tt.wantMessage == "" {
				if res.Outcome != Pass {
					t.Errorf("outcome %s, want pass", res.Outcome)
				}
				return
			}
			msg := res.DenyMessage(o)
			if !strings.Contains(msg, tt.wantMessage) || !strings.HasPrefix(msg, tt.kind+` staging/web is refused by SecurityPolicy "p" rule "r" (baseline:latest):`) {
				t.Errorf("message:\n%s\nwant it to contain:\n%s", msg, tt.wantMessage)
			}
			if !strings.Contains(msg, `A PolicyException in namespace "staging" naming policy "p" rule "r" can waive these.`) {
				t.Errorf("message lacks the exception hint:\n%s", msg)
			}
		})
	}
	if _, err := NewObject(&corev1.Service{}); err == nil || !strings.Contains(err.Error(), "carries no pod spec") {
		t.Errorf("a Service: error %v, want it refused", err)
	}
}
