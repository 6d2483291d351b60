// Package convert translates other tools' Pod Security policies into
// podsieve's SecurityPolicies and PolicyExceptions, for podsieve convert:
// Kyverno's validate.podSecurity rules and PolicyExceptions, Pod Security
// Admission namespace labels, and PodSecurityPolicies.
//
// A converter never drops anything silently: every part of the input it
// cannot express is reported as a Note with the document and the field, and
// where podsieve cannot say exactly what the source said, the output errs on
// the side of enforcing more (a match filter that cannot be translated widens
// the rule; an exclude filter, an exception entry or an exception match that
// cannot be translated is left out). Every object a converter returns
// compiles with the engine.
//
// The package is pure: it reads bytes and returns objects. It imports no
// controller-runtime; the command lists a live cluster's Namespaces itself.
package convert

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/manifest"
	"github.com/podsieve/podsieve/internal/words"
)

// Document is one object read from the input by manifest's reader (a List
// split into its items), not yet decoded.
type Document struct {
	// RawDocument holds where it was read (Loc), its apiVersion and kind and
	// its JSON.
	manifest.RawDocument
	// Name is metadata.namespace/metadata.name, or metadata.name.
	Name string
}

// Where names the document for messages: "policy.yaml, document 2".
func (d *Document) Where() string { return d.Loc.Where() }

// Read reads every path: a file, a directory (recursively, its *.yaml, *.yml
// and *.json files in lexical order) or "-" for stdin, with manifest's
// reader, so that convert splits an input into the same documents as eval
// and kubectl. Lists (kubectl get -o yaml) are split into their items. The
// error joins every problem: a path that cannot be read, a document that is
// not YAML or has no kind.
func Read(paths []string, stdin io.Reader) ([]Document, error) {
	var docs []Document
	var errs []error
	for raw, err := range manifest.Read(paths, stdin) {
		if de, ok := errors.AsType[*manifest.DocumentError](err); ok {
			errs = append(errs, atDoc(de.Loc, err))
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		docs = append(docs, Document{RawDocument: raw, Name: nameOf(raw.JSON)})
	}
	return docs, errors.Join(errs...)
}

// nameOf reads metadata.namespace/metadata.name leniently: a document whose
// metadata is malformed gets no name here, and the strict decoding of a kind
// that a converter reads reports the problem with its path.
func nameOf(data []byte) string {
	var head struct {
		Metadata struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(data, &head)
	if head.Metadata.Namespace != "" {
		return head.Metadata.Namespace + "/" + head.Metadata.Name
	}
	return head.Metadata.Name
}

// reads says which documents a converter reads, once, beside the
// converter; the converter notes every other document and ignores it.
type reads struct {
	// kinds names the kinds read, for messages: "v1 Namespace".
	kinds string
	is    func(*Document) bool
}

func (r reads) ignore(res *Result, d *Document) {
	newNoter(res, d).warn("", "not a %s; ignored", r.kinds)
}

// Reads says, for a --from name (kyverno, psp, psa-labels), which kinds its
// converter reads ("kyverno.io ClusterPolicy, Policy or PolicyException")
// and whether a document is one of them.
func Reads(from string) (kinds string, is func(*Document) bool, ok bool) {
	r, ok := map[string]reads{"kyverno": kyvernoReads, "psp": pspReads, "psa-labels": namespacesReads}[from]
	return r.kinds, r.is, ok
}

// docError is an error about one document, so that errors can be reported
// in input order whichever step found them.
type docError struct {
	loc manifest.Document
	err error
}

func (e docError) Error() string { return e.err.Error() }
func (e docError) Unwrap() error { return e.err }

// atDoc ties err (whose message names the document already) to loc.
func atDoc(loc manifest.Document, err error) error {
	if err == nil {
		return nil
	}
	return docError{loc: loc, err: err}
}

// SortErrors flattens joined errors and orders those about documents as the
// input did, after the others (a path that cannot be read, a bad flag).
func SortErrors(errs ...error) error {
	var flat []error
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		// A docError unwraps to one error, so it is kept whole even when
		// that error is a joined list (a document's field errors).
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		flat = append(flat, err)
	}
	for _, err := range errs {
		walk(err)
	}
	slices.SortStableFunc(flat, func(a, b error) int {
		var da, db docError
		okA, okB := errors.As(a, &da), errors.As(b, &db)
		switch {
		case okA && okB:
			return manifest.Compare(&da.loc, &db.loc)
		case okA:
			return 1
		case okB:
			return -1
		}
		return 0
	})
	return errors.Join(flat...)
}

// decodeStrict decodes d into v and reports every field v does not know (all
// of them, not only the first) and every type mismatch, naming the document.
func decodeStrict(d *Document, v any) error {
	return atDoc(d.Loc, decode(d, v))
}

func decode(d *Document, v any) error {
	var raw any
	if err := json.Unmarshal(d.JSON, &raw); err != nil {
		return fmt.Errorf("%s: %s %s: %w", d.Where(), d.Kind, d.Name, err)
	}
	var unknown []string
	unknownFields(raw, reflect.TypeOf(v).Elem(), "", &unknown)
	if len(unknown) > 0 {
		return fmt.Errorf("%s: %s %s: unknown field %s; podsieve convert reads the fields of %s that it documents: fix the spelling, or remove the field if it is newer than podsieve",
			d.Where(), d.Kind, d.Name, strings.Join(words.Quote(unknown), ", "), d.APIVersion)
	}
	if err := json.Unmarshal(d.JSON, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			var raw any
			if json.Unmarshal(d.JSON, &raw) == nil {
				if msg := typeMismatch(raw, reflect.TypeOf(v).Elem(), ""); msg != "" {
					return fmt.Errorf("%s: %s %s: %s", d.Where(), d.Kind, d.Name, msg)
				}
			}
			return fmt.Errorf("%s: %s %s: %s: a %s cannot hold %s", d.Where(), d.Kind, d.Name, te.Field, te.Type, te.Value)
		}
		return fmt.Errorf("%s: %s %s: %w", d.Where(), d.Kind, d.Name, err)
	}
	return nil
}

var (
	rawMessageType  = reflect.TypeOf(json.RawMessage{})
	unmarshalerType = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
)

// unknownFields walks a decoded JSON value beside the Go type it is meant
// for and appends the path of every object key that type has no field for.
func unknownFields(raw any, t reflect.Type, path string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType || reflect.PointerTo(t).Implements(unmarshalerType) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := raw.(map[string]any)
		if !ok {
			return // a type error, which json.Unmarshal reports
		}
		fields := map[string]reflect.Type{}
		jsonFields(t, fields)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			p := join(path, k)
			if !ok {
				*out = append(*out, p)
				continue
			}
			unknownFields(m[k], ft, p, out)
		}
	case reflect.Slice:
		l, ok := raw.([]any)
		if !ok {
			return
		}
		for i, item := range l {
			unknownFields(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out)
		}
	case reflect.Map:
		m, ok := raw.(map[string]any)
		if !ok {
			return
		}
		for k, v := range m {
			unknownFields(v, t.Elem(), path+"["+k+"]", out)
		}
	}
}

// typeMismatch finds the first value whose JSON type the Go type beside it
// cannot hold, and says so with its path as the user wrote it
// (spec.rules[0].match.any[1]...selector.matchLabels.app), what is expected,
// and for a string written as a boolean or number, to quote it. It returns
// "" when it finds none (json.Unmarshal's own message is used then).
func typeMismatch(raw any, t reflect.Type, path string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if raw == nil || t == rawMessageType || reflect.PointerTo(t).Implements(unmarshalerType) {
		return ""
	}
	got, want := jsonKind(raw), expectedKind(t)
	if got == want {
		return innerMismatch(raw, t, path)
	}
	if got == jsonKind(nil) || want == "" {
		return ""
	}
	msg := fmt.Sprintf("%s: %s, where %s is expected", path, got, want)
	if want == "a string" && (got == "a boolean" || got == "a number") {
		msg += "; quote the value: unquoted, YAML reads y, yes, on, true, n, no, off, false as booleans, and digits as numbers"
	}
	return msg
}

// expectedKind names the JSON type a Go type holds, as jsonKind does; ""
// for a type typeMismatch does not check.
func expectedKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice:
		return "a list"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	}
	return ""
}

// innerMismatch is typeMismatch of the fields, items or values of an
// object or list whose own type matches t, in key order.
func innerMismatch(raw any, t reflect.Type, path string) string {
	switch t.Kind() {
	case reflect.Struct:
		m := raw.(map[string]any)
		fields := map[string]reflect.Type{}
		jsonFields(t, fields)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if ft, ok := fields[k]; ok {
				if msg := typeMismatch(m[k], ft, join(path, k)); msg != "" {
					return msg
				}
			}
		}
	case reflect.Slice:
		for i, item := range raw.([]any) {
			if msg := typeMismatch(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); msg != "" {
				return msg
			}
		}
	case reflect.Map:
		m := raw.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if msg := typeMismatch(m[k], t.Elem(), join(path, k)); msg != "" {
				return msg
			}
		}
	}
	return ""
}

// jsonKind names the type of a decoded JSON value for messages.
func jsonKind(raw any) string {
	switch raw.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return "null"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// jsonFields lists a struct's JSON field names, with inlined embedded structs.
func jsonFields(t reflect.Type, out map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			jsonFields(ft, out)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
}

// Severity says whether a note changes what the output decides.
type Severity int

const (
	// Warning means translated, but podsieve behaves differently in a way the
	// user should know about (a renamed object, an operational setting
	// without counterpart, an object kind the converter does not read).
	Warning Severity = iota
	// Untranslated means part of the source could not be expressed. The output
	// enforces more than the source (or, for PSP fields such as fsGroup, the
	// restriction is lost); the note says which.
	Untranslated
)

// Note is something the user must read about one part of the input.
type Note struct {
	Severity Severity
	// Where is the document ("kyverno.yaml, document 2"), or "cluster".
	Where string
	// Object is "Kind name" of the source object.
	Object string
	// Field is the source field, for example spec.rules[0].match.any[0].resources.names.
	Field   string
	Message string
	// loc orders notes as the input did.
	loc manifest.Document
}

func (n Note) String() string {
	s := n.Where + ": " + n.Object
	if n.Field != "" {
		s += ": " + n.Field
	}
	prefix := "warning"
	if n.Severity == Untranslated {
		prefix = "not translated"
	}
	return s + ": " + prefix + ": " + n.Message
}

// Output is one converted object and the documents it comes from.
type Output struct {
	From   string
	Object runtime.Object // *SecurityPolicy or *PolicyException
}

// Result is what a converter produced.
type Result struct {
	Objects []Output
	Notes   []Note
}

// Untranslated reports whether some part of the input could not be translated.
func (r *Result) Untranslated() bool {
	return slices.ContainsFunc(r.Notes, func(n Note) bool { return n.Severity == Untranslated })
}

// sortNotes orders notes as the input: converters visit documents in
// another order (Kyverno policies before exceptions).
func (r *Result) sortNotes() {
	slices.SortStableFunc(r.Notes, func(a, b Note) int { return manifest.Compare(&a.loc, &b.loc) })
}

// noter collects the notes of one source object.
type noter struct {
	res    *Result
	loc    manifest.Document
	where  string
	object string
}

func newNoter(res *Result, d *Document) *noter {
	return &noter{res: res, loc: d.Loc, where: d.Where(), object: d.Kind + " " + d.Name}
}

func (n *noter) note(s Severity, field, format string, args ...any) {
	n.res.Notes = append(n.res.Notes, Note{Severity: s, Where: n.where, Object: n.object, Field: field, Message: fmt.Sprintf(format, args...), loc: n.loc})
}

func (n *noter) warn(field, format string, args ...any) { n.note(Warning, field, format, args...) }

func (n *noter) untranslated(field, format string, args ...any) {
	n.note(Untranslated, field, format, args...)
}

// WriteYAML writes the objects as multi-document YAML, each preceded by a
// comment naming its source, without status or empty metadata fields.
func WriteYAML(w io.Writer, objects []Output) error {
	for i, o := range objects {
		data, err := json.Marshal(o.Object)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			return err
		}
		delete(m, "status")
		if meta, ok := m["metadata"].(map[string]any); ok {
			delete(meta, "creationTimestamp")
		}
		y, err := yaml.Marshal(m)
		if err != nil {
			return err
		}
		sep := ""
		if i > 0 {
			sep = "---\n"
		}
		if _, err := fmt.Fprintf(w, "%s# converted from %s\n%s", sep, o.From, y); err != nil {
			return err
		}
	}
	return nil
}

// newPolicy and newException fill in the type and name.
func newPolicy(name string) *policyv1alpha1.SecurityPolicy {
	return &policyv1alpha1.SecurityPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: policyv1alpha1.GroupVersion.String(), Kind: "SecurityPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}
}

func newException(namespace, name string) *policyv1alpha1.PolicyException {
	return &policyv1alpha1.PolicyException{
		TypeMeta:   metav1.TypeMeta{APIVersion: policyv1alpha1.GroupVersion.String(), Kind: "PolicyException"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
	}
}

// ruleName turns a name into a valid rule name: lower case letters, digits
// and dashes, at most 63 characters, starting and ending alphanumeric.
func ruleName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	for strings.Contains(out, "--") {
		out = strings.ReplaceAll(out, "--", "-")
	}
	if len(out) > 63 {
		out = strings.TrimRight(out[:63], "-")
	}
	if out == "" {
		out = "rule"
	}
	return out
}
