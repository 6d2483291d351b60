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
			ok = strings.Trim(v, "0123456789*?") == ""
		case capabilityValue:
			ok = strings.Trim(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_*?") == ""
		}
		if !ok {
			return fmt.Errorf("%s.values[%d]: %q can never match field %s, whose values are %s", path, i, v, field, describeShape(shape))
		}
	}
	return nil
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
