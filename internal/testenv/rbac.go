package testenv

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AggregateClusterRoles does what kube-controller-manager's clusterrole
// aggregation controller does (envtest runs no controller-manager): every
// ClusterRole with an aggregationRule gets the rules of the ClusterRoles its
// selectors match.
func AggregateClusterRoles(ctx context.Context, c client.Client) error {
	var roles rbacv1.ClusterRoleList
	if err := c.List(ctx, &roles); err != nil {
		return err
	}
	for i := range roles.Items {
		target := &roles.Items[i]
		if target.AggregationRule == nil {
			continue
		}
		var rules []rbacv1.PolicyRule
		for _, sel := range target.AggregationRule.ClusterRoleSelectors {
			selector, err := metav1.LabelSelectorAsSelector(&sel)
			if err != nil {
				return fmt.Errorf("ClusterRole %s: %w", target.Name, err)
			}
			var matched rbacv1.ClusterRoleList
			if err := c.List(ctx, &matched, client.MatchingLabelsSelector{Selector: selector}); err != nil {
				return err
			}
			for _, m := range matched.Items {
				if m.Name != target.Name {
					rules = append(rules, m.Rules...)
				}
			}
		}
		target.Rules = rules
		if err := c.Update(ctx, target); err != nil {
			return err
		}
	}
	return nil
}

// BindUser grants a user a ClusterRole (or, with kind "Role", a Role) in one
// namespace, as a cluster admin does with a RoleBinding.
func BindUser(ctx context.Context, c client.Client, namespace, user, kind, role string) error {
	return c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user + "-" + role},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})
}

// As returns a client that impersonates a user, with cfg's other settings
// (its warning handler among them).
func As(cfg *rest.Config, user string) (client.Client, error) {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user}
	return client.New(c, client.Options{Scheme: Scheme()})
}
