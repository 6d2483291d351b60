package engine

import "slices"

// Exemption is a source that covers a finding and the entry of it that
// does, as the decision found it: podsieve explain prints this record, it
// does not test the entries again. It is written, in text and JSON, as its
// Source.
//
// Entry next to Source costs a decision nothing: a finding covered by one
// source, by far the most common, allocates 64 bytes either way (the size
// class a 56-byte Source is rounded up to); only a second source covering
// the same finding pays for it.
type Exemption struct {
	Source
	// Entry is the index of the source's first entry that covers the
	// violation, among its entries in the order they are written:
	// spec.rules[i].podSecurity.exclude[Entry] of the policy rule,
	// spec.podSecurity[Entry] of the exception. A source stops at its first
	// covering entry, so later entries of it that would cover the violation
	// too are not recorded. WholeRuleEntry for an exception whose empty
	// podSecurity waives the whole rule.
	//
	// The index counts the entries that compiled: it is the entry's index in
	// the object unless an entry before it does not compile, which only a
	// stored policy may hold (CompileStoredPolicy skips such an entry: it
	// waives nothing).
	Entry int
}

// WholeRuleEntry is the Exemption.Entry of an exception that waives the
// whole rule: its podSecurity is empty, no entry covers.
const WholeRuleEntry = -1

// ExemptingSources are the sources of ExemptedBy, in order.
func (f *Finding) ExemptingSources() []Source {
	if len(f.ExemptedBy) == 0 {
		return nil
	}
	out := make([]Source, len(f.ExemptedBy))
	for i := range f.ExemptedBy {
		out[i] = f.ExemptedBy[i].Source
	}
	return out
}

// exempt records ex in ExemptedBy. Sources are distinct unless the same
// exception was offered twice (dup); only then does it look for ex's source
// before it appends.
func (f *Finding) exempt(ex Exemption, dup bool) {
	if dup && slices.ContainsFunc(f.ExemptedBy, func(x Exemption) bool { return x.Source == ex.Source }) {
		return
	}
	f.ExemptedBy = append(f.ExemptedBy, ex)
}
