package engine

import (
	"fmt"
	"slices"
	"strings"
)

// WhyNotAll says every reason an entry of the violation's control does not
// cover it, one per field of the entry that does not match (restrictedField,
// containerKinds, containerNames, values, images), each tested on its own; nil when it
// covers it. podsieve explain prints them all, so that fixing one field does
// not reveal the next only on the next run. An entry of another control
// gets WhyNot's single reason.
func (x *Exclusion) WhyNotAll(v *Violation) []string {
	first := x.WhyNot(v)
	if first == "" {
		return nil
	}
	if !x.SameControl(v) {
		return []string{first}
	}
	// Each field of the entry on its own, judged exactly as Evaluate does.
	var out []string
	for _, only := range []Exclusion{
		{control: x.control, field: x.field},
		{control: x.control, kinds: x.kinds},
		{control: x.control, names: x.names},
		{control: x.control, values: x.values, hasValues: x.hasValues},
		{control: x.control, images: x.images},
	} {
		if r := only.WhyNot(v); r != "" && !slices.Contains(out, r) {
			if only.hasValues && len(v.Values) > 0 {
				for _, val := range v.Values {
					if !x.values.Match(val) {
						r += CrossSlashHint(x.values.Patterns(), val)
						break
					}
				}
			}
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return []string{first}
	}
	return out
}

// CrossSlashHint is a hint for a value (or image) that a glob misses only
// because * stays within one path segment: "; * does not cross /: write
// /var/log/** for the paths below /var/log". "" when no glob would match
// with ** in place of its last *.
func CrossSlashHint(patterns []string, val string) string {
	for _, p := range patterns {
		if s := crossSlash(p); s != "" {
			if g, err := CompileGlob(s); err == nil && g.Match(val) {
				return fmt.Sprintf(`; * does not cross "/": write %q to match the paths below it`, s)
			}
		}
	}
	return ""
}

// crossSlash widens a glob that ends in a single * below a literal path:
// /var/log* and /var/log/* become /var/log/**. It is "" for any other glob:
// one whose * is elsewhere (a hint about the paths "below it" would not
// fit), one with other wildcards before it, or one whose * has no path
// before it ("*", "/*": ** there would cover every path).
func crossSlash(p string) string {
	base, found := strings.CutSuffix(p, "*")
	if !found || strings.HasSuffix(base, "*") || strings.ContainsAny(base, `*?[]\`) || strings.Trim(base, "/") == "" {
		return ""
	}
	return strings.TrimSuffix(base, "/") + "/**"
}
