package engine

import (
	"fmt"
	"strings"
)

// SourceKind is what a waiver comes from.
type SourceKind uint8

const (
	// SourcePolicyRule is a rule's own exclude entries.
	SourcePolicyRule SourceKind = iota + 1
	// SourceException is a PolicyException.
	SourceException
)

// Source names where a waiver comes from: a SecurityPolicy rule's exclude
// entries, or a PolicyException. It is written, wherever podsieve prints or
// serialises it, as policy/<policy>/<rule> or exception/<namespace>/<name>.
type Source struct {
	Kind SourceKind
	// Namespace and Name are the PolicyException's; for a policy rule,
	// Name is the policy's and Rule the rule's.
	Namespace, Name, Rule string
}

// PolicyRuleSource is the source of a rule's own exclude entries.
func PolicyRuleSource(policy, rule string) Source {
	return Source{Kind: SourcePolicyRule, Name: policy, Rule: rule}
}

// ExceptionSource is the source of a PolicyException's entries.
func ExceptionSource(namespace, name string) Source {
	return Source{Kind: SourceException, Namespace: namespace, Name: name}
}

// IsException reports whether the source is a PolicyException.
func (s Source) IsException() bool { return s.Kind == SourceException }

// NamespacedName is a PolicyException's <namespace>/<name>, or a policy
// rule's <policy>/<rule>.
func (s Source) NamespacedName() string {
	if s.Kind == SourceException {
		return s.Namespace + "/" + s.Name
	}
	return s.Name + "/" + s.Rule
}

// String is policy/<policy>/<rule> or exception/<namespace>/<name>.
func (s Source) String() string {
	switch s.Kind {
	case SourcePolicyRule:
		return "policy/" + s.Name + "/" + s.Rule
	case SourceException:
		return "exception/" + s.Namespace + "/" + s.Name
	}
	return ""
}

// MarshalText writes the source as String does, so JSON output keeps the
// strings it has always had.
func (s Source) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (s *Source) UnmarshalText(b []byte) error {
	kind, rest, _ := strings.Cut(string(b), "/")
	first, second, ok := strings.Cut(rest, "/")
	switch {
	case !ok || first == "" || second == "" || strings.Contains(second, "/"):
	case kind == "policy":
		*s = PolicyRuleSource(first, second)
		return nil
	case kind == "exception":
		*s = ExceptionSource(first, second)
		return nil
	}
	return fmt.Errorf("%q is not a source; write policy/<policy>/<rule> or exception/<namespace>/<name>", b)
}

// JoinSources writes sources with String, separated by sep.
func JoinSources(sources []Source, sep string) string {
	parts := make([]string, len(sources))
	for i, s := range sources {
		parts[i] = s.String()
	}
	return strings.Join(parts, sep)
}
