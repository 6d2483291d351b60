package engine

import (
	"fmt"
	"strings"
)

// valueShape is what the values attribution reports for a field look like,
// so that an entry's values can be checked against it before they fail to
// match anything at admission time.
type valueShape int

const (
	anyValue valueShape = iota
	boolValue
	numberValue
	capabilityValue
)

var shapeOfField = func() map[string]valueShape {
	m := map[string]valueShape{
		fPodHostProcess:  boolValue,
		fHostNetwork:     boolValue,
		fHostPID:         boolValue,
		fHostIPC:         boolValue,
		fPodRunAsNonRoot: boolValue,
		fPodRunAsUser:    numberValue,
	}
	for _, f := range [][numKinds]string{fCtrHostProcess, fCtrPrivileged, fCtrAllowPrivilegeEscalation, fCtrRunAsNonRoot} {
		for _, p := range f {
			m[p] = boolValue
		}
	}
	for _, f := range [][numKinds]string{fCtrHostPort, fCtrRunAsUser} {
		for _, p := range f {
			m[p] = numberValue
		}
	}
	for _, f := range [][numKinds]string{fCtrCapAdd, fCtrCapDrop} {
		for _, p := range f {
			m[p] = capabilityValue
		}
	}
	return m
}()

// checkValues refuses values that can never match a violation of field: a
// value that is not true or false for a boolean field, not digits for a
// number, not a capability name for capabilities. Globs keep their * and ?.
func checkValues(field string, values []string, path string) error {
	shape := shapeOfField[field]
	for i, v := range values {
		ok := true
		switch shape {
		case boolValue:
			ok = v == "true" || v == "false" || v == "*"
		case numberValue:
			ok = onlyBytes(v, isNumberGlobByte)
		case capabilityValue:
			ok = onlyBytes(v, isCapabilityGlobByte)
		}
		if !ok {
			return fmt.Errorf("%s.values[%d]: %q can never match field %s, whose values are %s", path, i, v, field, describeShape(shape))
		}
	}
	return nil
}

// onlyBytes reports whether every byte of v is one ok admits; strings.Trim
// with a cutset would build the set again for each value.
func onlyBytes(v string, ok func(byte) bool) bool {
	for i := 0; i < len(v); i++ {
		if !ok(v[i]) {
			return false
		}
	}
	return true
}

func isNumberGlobByte(b byte) bool { return '0' <= b && b <= '9' || b == '*' || b == '?' }

func isCapabilityGlobByte(b byte) bool {
	return 'A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '_' || b == '*' || b == '?'
}

func describeShape(s valueShape) string {
	switch s {
	case boolValue:
		return `"true" or "false"`
	case numberValue:
		return `numbers, such as "9100" or "0"`
	case capabilityValue:
		return `capability names, such as "NET_ADMIN"`
	}
	return "free text"
}

// ValueGlob returns a glob for an entry's values that matches value, a value
// attribution reported for field, and as little else as the entry's rules
// allow. exact is false when the value holds characters a glob cannot spell
// (*, ?, [, ], \) or that the field's values may not contain: each becomes
// "?" (one character other than "/"), or "**" for a "/", so the glob still
// matches the value and only values of its shape around those characters.
func ValueGlob(field, value string) (glob string, exact bool) {
	allowed := func(r rune) bool { return true }
	switch shapeOfField[field] {
	case boolValue:
		if value == "true" || value == "false" {
			return value, true
		}
		return "*", false
	case numberValue:
		allowed = func(r rune) bool { return r >= '0' && r <= '9' }
	case capabilityValue:
		allowed = func(r rune) bool {
			return r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		}
	}
	if value == "" {
		// An empty value (an explicitly empty type: appArmorProfile: {}
		// is reported as type "") has no literal glob; "*" is the only
		// glob that matches it.
		return "*", false
	}
	var b strings.Builder
	exact = true
	for _, r := range value {
		switch {
		case strings.ContainsRune(`*?[]\`, r) || !allowed(r):
			exact = false
			if r == '/' {
				b.WriteString("**")
			} else {
				b.WriteByte('?')
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String(), exact
}
