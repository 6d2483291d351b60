package engine

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// MaxFieldErrors bounds the field errors ValidatePolicy and
// ValidateException list; what is past it is counted in one last error.
const MaxFieldErrors = 64

// ValidatePolicy returns every error of a SecurityPolicy as written, each
// with its field path, so that its writer fixes them all in one round (the
// validating webhook answers them in one 422, as the API server answers its
// own validation). It runs CompilePolicy's checks, through the reading that
// CompileStoredPolicy uses to go on past a part that does not compile, and
// is empty exactly when CompilePolicy compiles sp.
func ValidatePolicy(sp *policyv1alpha1.SecurityPolicy) field.ErrorList {
	st := &strictReader{collect: true}
	var errs fieldErrors
	if _, err := compilePolicy(sp, st); err != nil {
		// Collecting, compilePolicy notes every error; one it returned all
		// the same is listed too.
		errs.add(err, "spec")
	}
	for _, r := range st.readings {
		errs.add(fmt.Errorf("%s", r.Problem), r.Field)
	}
	if len(errs.list) == 0 {
		if _, err := CompilePolicy(sp); err != nil {
			// Never reached while the two read the same checks; never an
			// allow if they ever do not.
			errs.add(err, "spec")
		}
	}
	return errs.errorList()
}

// ValidateException returns every error of a PolicyException as written,
// each with its field path, as ValidatePolicy does for a policy. It runs
// CompileException's checks, going on past each error, and is empty exactly
// when CompileException compiles pe. The guardrails of the policies it names
// are not its to judge: they need the index (Exception.State).
func ValidateException(pe *policyv1alpha1.PolicyException, clusterNamespace string) field.ErrorList {
	errs := &fieldErrors{}
	if _, err := compileException(pe, clusterNamespace, errs); err != nil {
		errs.add(err, "spec")
	}
	if len(errs.list) == 0 {
		if _, err := CompileException(pe, clusterNamespace); err != nil {
			errs.add(err, "spec")
		}
	}
	return errs.errorList()
}

// fieldErrors collects the errors of one object, at most MaxFieldErrors of
// them. A nil *fieldErrors collects nothing: note returns the error, and
// compiling stops at the first one, as CompileException wants.
type fieldErrors struct {
	list field.ErrorList
	more int
}

// note returns err when c is nil; otherwise it collects err (if not nil)
// and returns nil, so that the caller goes on.
func (c *fieldErrors) note(err error, path string) error {
	if c == nil || err == nil {
		return err
	}
	c.add(err, path)
	return nil
}

// failed reports whether c collected an error.
func (c *fieldErrors) failed() bool { return c != nil && (len(c.list) > 0 || c.more > 0) }

// add collects err as a field error. The engine's messages start with the
// path of the field they are about ("spec.rules[0].name: a rule needs a
// name"), which is more precise than path, the part being compiled: that
// path is the error's field, and the rest its detail.
func (c *fieldErrors) add(err error, path string) {
	if len(c.list) >= MaxFieldErrors {
		c.more++
		return
	}
	msg := err.Error()
	if i := strings.Index(msg, ": "); i > 0 && strings.HasPrefix(msg[:i], "spec") && !strings.ContainsAny(msg[:i], " \"") {
		path, msg = msg[:i], msg[i+2:]
	}
	c.list = append(c.list, &field.Error{Type: field.ErrorTypeInvalid, Field: path, BadValue: field.OmitValueType{}, Detail: msg})
}

// errorList is what c collected, with a last error counting those past
// MaxFieldErrors.
func (c *fieldErrors) errorList() field.ErrorList {
	if c.more > 0 {
		return append(c.list, &field.Error{Type: field.ErrorTypeInvalid, Field: "spec", BadValue: field.OmitValueType{},
			Detail: fmt.Sprintf("%d more errors are not listed: fix these and apply again", c.more)})
	}
	return c.list
}
