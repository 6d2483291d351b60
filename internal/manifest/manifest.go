// Package manifest reads Kubernetes objects from files, directories and
// stdin for the offline commands: multi-document YAML or JSON, v1 Lists,
// decoded strictly into typed objects so that a misspelt field is an error
// that names the file, the document and the field, never a silent default.
//
// It decodes what podsieve decides on (SecurityPolicy, PolicyException,
// Namespace and the pod-bearing kinds) and sets every other kind aside.
// Read and Documents are the reader underneath, for a caller that decodes
// other kinds itself (podsieve convert): podsieve has one reader, so every
// command splits an input into the same documents as kubectl does.
package manifest

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/yaml"
	yaml3 "sigs.k8s.io/yaml/goyaml.v3"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// Stdin is the path that means standard input.
const Stdin = "-"

// Document is one decoded object and where it came from.
type Document struct {
	// Source is the file path, or "-" for stdin.
	Source string
	// Index is the document's 1-based position in its source; Item is its
	// 1-based position in a List document, or 0.
	Index, Item int
	// Line is the 1-based line of the source where the document's content
	// starts: its first line that is not blank, only a comment or the
	// "---" separator. Items of a List have the List's line. Reports that
	// point into files (SARIF) use it.
	Line int
	// ClusterState marks a document read as the cluster's own state
	// (podsieve's --cluster-state), which the offline commands trust as
	// the cluster holds it; false for the change being decided (-f).
	// Load leaves it false; the caller sets it.
	ClusterState bool
	Object       runtime.Object
}

// Where names the document for messages: "deploy.yaml, document 2".
func (d *Document) Where() string {
	s := fmt.Sprintf("%s, document %d", displayName(d.Source), d.Index)
	if d.Item > 0 {
		s += fmt.Sprintf(", item %d", d.Item)
	}
	return s
}

// Compare orders documents as the input did, within one source; sources
// compare by name.
func Compare(a, b *Document) int {
	return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.Index, b.Index), cmp.Compare(a.Item, b.Item))
}

func displayName(source string) string {
	if source == Stdin {
		return "<stdin>"
	}
	return source
}

// Set is what a load found, in input order.
type Set struct {
	Policies   []Document // *policyv1alpha1.SecurityPolicy
	Exceptions []Document // *policyv1alpha1.PolicyException
	Namespaces []Document // *corev1.Namespace
	Workloads  []Document // pod-bearing objects
	// Ignored are objects of other kinds, by "kind name (where)".
	Ignored []string
}

var (
	scheme = runtime.NewScheme()
	// strict refuses unknown and duplicate fields.
	strict = serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
)

func init() {
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, policyv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
}

// Load reads every path: a file, a directory (see Expand) or "-" for stdin. It returns every bad
// document's error joined, not only the first.
func Load(paths []string, stdin io.Reader) (*Set, error) {
	set := &Set{}
	var errs []error
	// The errors of a List's items are reported as one error that names the
	// List and then each item, as eval has always printed them.
	var list Document
	var itemErrs []error
	flush := func() {
		if len(itemErrs) > 0 {
			errs = append(errs, fmt.Errorf("%s: %w", list.Where(), errors.Join(itemErrs...)))
			itemErrs = nil
		}
	}
	for raw, err := range Read(paths, stdin) {
		de, isDocErr := errors.AsType[*DocumentError](err)
		if err != nil && !isDocErr {
			flush()
			errs = append(errs, err) // a path that cannot be read
			continue
		}
		loc := raw.Loc
		if isDocErr {
			loc, err = de.Loc, de.Err
		}
		if loc.Item == 0 || loc.Source != list.Source || loc.Index != list.Index {
			flush()
		}
		if err == nil {
			err = set.add(raw)
		}
		switch {
		case err == nil:
		case loc.Item == 0:
			errs = append(errs, fmt.Errorf("%s: %w", loc.Where(), err))
		default:
			list = Document{Source: loc.Source, Index: loc.Index}
			itemErrs = append(itemErrs, fmt.Errorf("%s: %w", loc.Where(), err))
		}
	}
	flush()
	return set, errors.Join(errs...)
}

// RawDocument is one document of the input, or one item of a List document,
// split and converted to JSON but not decoded into a type.
type RawDocument struct {
	// Loc is where the document was read; its Object is unset.
	Loc Document
	// TypeMeta is the document's apiVersion and kind, both set. An item of a
	// typed List (DeploymentList) that does not say its own has the List's,
	// and JSON holds them too.
	metav1.TypeMeta
	// JSON is the document as JSON.
	JSON []byte
}

// DocumentError is a problem with one document or List item; its message
// names the document first ("deploy.yaml, document 2: ...").
type DocumentError struct {
	Loc Document
	Err error
}

func (e *DocumentError) Error() string { return e.Loc.Where() + ": " + e.Err.Error() }
func (e *DocumentError) Unwrap() error { return e.Err }

// Read reads every path, as Load does, and yields each document (each item of
// a List) in input order, or an error: a *DocumentError for a document that
// cannot be read, a plain error for a path that cannot be.
func Read(paths []string, stdin io.Reader) iter.Seq2[RawDocument, error] {
	return func(yield func(RawDocument, error) bool) {
		stdinRead := false
		for _, p := range paths {
			if p == Stdin {
				if stdinRead {
					if !yield(RawDocument{}, errors.New(`-f -: standard input can be read only once`)) {
						return
					}
					continue
				}
				stdinRead = true
				if !readAll(Stdin, stdin, yield) {
					return
				}
				continue
			}
			if !readPath(p, yield) {
				return
			}
		}
	}
}

// readPath yields the documents of the files a path names (Expand), or the
// error that it names none; false when yield asked to stop.
func readPath(p string, yield func(RawDocument, error) bool) bool {
	files, err := Expand(p)
	if err != nil {
		return yield(RawDocument{}, err)
	}
	for _, f := range files {
		if !readFile(f, yield) {
			return false
		}
	}
	return true
}

// Expand lists the manifest files a path names: the file itself; a
// directory that holds a kustomization file, the files its resources list
// (see expandKustomization), the objects kubectl apply -k would apply; any other
// directory's *.yaml, *.yml and *.json files, recursively, in lexical order.
// The error names the path as the -f flag gave it.
func Expand(p string) ([]string, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", p, errors.Unwrap(err))
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	k, err := kustomizationIn(p)
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", p, err)
	}
	if k != "" {
		files, err := expandKustomization(k)
		if err != nil {
			return nil, fmt.Errorf("-f %s: %w", p, err)
		}
		return files, nil
	}
	var files []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && slices.Contains([]string{".yaml", ".yml", ".json"}, strings.ToLower(filepath.Ext(path))) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", p, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("-f %s: the directory holds no *.yaml, *.yml or *.json file", p)
	}
	return files, nil
}

func readFile(path string, yield func(RawDocument, error) bool) bool {
	f, err := os.Open(path)
	if err != nil {
		return yield(RawDocument{}, fmt.Errorf("%s: %w", path, err))
	}
	defer func() { _ = f.Close() }()
	return readAll(path, f, yield)
}

func readAll(source string, r io.Reader, yield func(RawDocument, error) bool) bool {
	for d, err := range Documents(source, r) {
		if !yield(d, err) {
			return false
		}
	}
	return true
}

// Documents splits a stream into documents as kubectl does (see docReader),
// converts each to JSON and splits a List into its items. It yields them in
// input order, or for a document that cannot be read a *DocumentError naming
// it; after an error of the stream itself (a bad separator) it stops. A
// document that is empty or only comments yields nothing.
func Documents(source string, r io.Reader) iter.Seq2[RawDocument, error] {
	return func(yield func(RawDocument, error) bool) {
		reader := &docReader{r: bufio.NewReader(r)}
		for index := 1; ; index++ {
			raw, line, err := reader.Read()
			if errors.Is(err, io.EOF) {
				return
			}
			loc := Document{Source: source, Index: index, Line: line}
			if err != nil {
				yield(RawDocument{}, &DocumentError{Loc: loc, Err: err})
				return
			}
			if objects := jsonStream(raw); len(objects) > 1 {
				// Objects one after the other, as kubectl reads a .json
				// file: one document each.
				for i, o := range objects {
					if !split(Document{Source: source, Index: index + i, Line: line + o.line}, o.data, metav1.TypeMeta{}, yield) {
						return
					}
				}
				index += len(objects) - 1
				continue
			}
			if !split(loc, raw, metav1.TypeMeta{}, yield) {
				return
			}
		}
	}
}

// separator starts a line that ends a YAML document.
const separator = "---"

// docReader splits a stream into YAML documents exactly as
// k8s.io/apimachinery's YAMLReader does, so that podsieve and kubectl agree
// on what document N is, and counts lines, which YAMLReader does not, so that
// each document knows the line it starts on. TestDocReaderAgrees and
// FuzzDocReader hold the two splitters together.
type docReader struct {
	r    *bufio.Reader
	line int // lines read so far
}

// Read returns the next document and the line its content starts on (0 when
// it holds only blank lines, comments and separators), or io.EOF after the
// last one.
func (dr *docReader) Read() (doc []byte, start int, err error) {
	var buf bytes.Buffer
	for {
		line, err := dr.readLine()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, err
		}
		isSep := bytes.HasPrefix(line, []byte(separator))
		if isSep {
			// Only spaces and a comment may follow a separator.
			rest := strings.TrimSpace(string(line[len(separator):]))
			if rest != "" && rest[0] != '#' {
				return nil, 0, fmt.Errorf("invalid Yaml document separator: %s", rest)
			}
			if buf.Len() != 0 {
				return buf.Bytes(), start, nil
			}
			if errors.Is(err, io.EOF) {
				return nil, 0, err
			}
		}
		if errors.Is(err, io.EOF) {
			if buf.Len() != 0 {
				return buf.Bytes(), start, nil
			}
			return nil, 0, err
		}
		// A separator that opens the stream stays in the first document,
		// as YAMLReader keeps it.
		if t := bytes.TrimSpace(line); start == 0 && !isSep && len(t) > 0 && t[0] != '#' {
			start = dr.line
		}
		buf.Write(line)
	}
}

// readLine returns one line with its end written as "\n", as YAMLReader's
// LineReader does: an empty line with io.EOF after the last.
func (dr *docReader) readLine() ([]byte, error) {
	var buf bytes.Buffer
	isPrefix, err := true, error(nil)
	for isPrefix && err == nil {
		var line []byte
		line, isPrefix, err = dr.r.ReadLine()
		buf.Write(line)
	}
	if err == nil {
		dr.line++
	}
	buf.WriteByte('\n')
	return buf.Bytes(), err
}

// streamed is one JSON value of a stream, and the line it starts on,
// counted from 0 within its document.
type streamed struct {
	data []byte
	line int
}

// jsonStream splits a document that is JSON objects one after the other
// ({...}{...}) into them, or returns nil for anything else (one object, or
// not JSON: YAML, which may also start with "{").
func jsonStream(raw []byte) []streamed {
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var out []streamed
	for {
		var v json.RawMessage
		if err := dec.Decode(&v); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			return nil
		}
		end := int(dec.InputOffset())
		start := end - len(v)
		out = append(out, streamed{data: v, line: bytes.Count(raw[:start], []byte("\n"))})
	}
}

// singleNode refuses a YAML document with anything after its first node
// ("{...} {...}", "[1] x"): the YAML parser reads the first and drops the
// rest without a word, so an object in it would never be decided.
func singleNode(raw []byte) error {
	dec := yaml3.NewDecoder(bytes.NewReader(raw))
	var first, next yaml3.Node
	if dec.Decode(&first) != nil {
		return nil // the YAML converter says what is wrong
	}
	if err := dec.Decode(&next); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("something follows the first object or value, and would be ignored: %w; "+
			"write one object per document, separated by a line ---", err)
	}
	return nil
}

// list is a v1 List, as kubectl get -o yaml prints.
type list struct {
	Items []json.RawMessage `json:"items"`
}

// split converts one document to JSON and yields it, or, for a List, each of
// its items; inherit is the type of a List's items, for items that do not say
// theirs. It returns false when yield asks to stop.
func split(loc Document, raw []byte, inherit metav1.TypeMeta, yield func(RawDocument, error) bool) bool {
	fail := func(err error) bool { return yield(RawDocument{}, &DocumentError{Loc: loc, Err: err}) }
	if loc.Item == 0 {
		if err := singleNode(raw); err != nil {
			return fail(err)
		}
	}
	data, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return fail(fmt.Errorf("not valid YAML: %w", err))
	}
	if t := bytes.TrimSpace(data); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return true // an empty document, or only comments
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(data, &tm); err != nil {
		return fail(fmt.Errorf("not a Kubernetes object: %w", err))
	}
	if tm.APIVersion == "" && tm.Kind == "" && inherit.Kind != "" {
		tm = inherit
		if data, err = withTypeMeta(data, tm); err != nil {
			return fail(err)
		}
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		return fail(errors.New("apiVersion and kind are required"))
	}
	if !strings.HasSuffix(tm.Kind, "List") || loc.Item != 0 {
		return yield(RawDocument{Loc: loc, TypeMeta: tm, JSON: data}, nil)
	}
	// v1 List (kubectl get -o yaml) or a typed list (DeploymentList).
	var l list
	if err := json.Unmarshal(data, &l); err != nil {
		return fail(fmt.Errorf("%s: %w", tm.Kind, err))
	}
	var itemType metav1.TypeMeta
	if tm.Kind != "List" {
		itemType = metav1.TypeMeta{APIVersion: tm.APIVersion, Kind: strings.TrimSuffix(tm.Kind, "List")}
	}
	for i, item := range l.Items {
		it := loc
		it.Item = i + 1
		if !split(it, item, itemType, yield) {
			return false
		}
	}
	return true
}

// add decodes one document strictly into its type and files it, or sets it
// aside when podsieve does not decide on its kind.
func (s *Set) add(raw RawDocument) error {
	d, tm, data := raw.Loc, raw.TypeMeta, raw.JSON
	gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	gk := gvk.GroupKind()
	_, bearing := engine.KindFor(gk)
	ours := bearing || gk == (schema.GroupKind{Kind: "Namespace"}) || gk.Group == policyv1alpha1.GroupVersion.Group
	if !ours {
		s.Ignored = append(s.Ignored, fmt.Sprintf("%s %s (%s)", tm.Kind, nameOf(data), d.Where()))
		return nil
	}
	if !scheme.Recognizes(gvk) {
		return fmt.Errorf("%s: apiVersion %q is not one podsieve reads; use %s", tm.Kind, tm.APIVersion, servedVersion(gk))
	}
	obj, _, err := strict.Decode(data, nil, nil)
	if err != nil {
		return fmt.Errorf("%s %s: %w", tm.Kind, nameOf(data), err)
	}
	if m, ok := obj.(metav1.Object); ok && m.GetName() == "" {
		// A workload the API server names (generateName, as kubectl create
		// and mesh injectors write them) is decided under the name it will
		// have: the prefix and a generated part, engine.GeneratedName.
		switch {
		case !bearing:
			return fmt.Errorf("%s: metadata.name is required", tm.Kind)
		case m.GetGenerateName() == "":
			return fmt.Errorf("%s: metadata.name or metadata.generateName is required", tm.Kind)
		}
		m.SetName(m.GetGenerateName() + engine.GeneratedName)
	}
	d.Object = obj
	switch obj.(type) {
	case *policyv1alpha1.SecurityPolicy:
		s.Policies = append(s.Policies, d)
	case *policyv1alpha1.PolicyException:
		s.Exceptions = append(s.Exceptions, d)
	case *corev1.Namespace:
		s.Namespaces = append(s.Namespaces, d)
	default:
		if _, ok := engine.KindFor(gk); !ok {
			return fmt.Errorf("%s: podsieve does not evaluate this kind", tm.Kind)
		}
		s.Workloads = append(s.Workloads, d)
	}
	return nil
}

// withTypeMeta sets apiVersion and kind on a JSON object.
func withTypeMeta(data []byte, tm metav1.TypeMeta) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("not a Kubernetes object: %w", err)
	}
	m["apiVersion"], _ = json.Marshal(tm.APIVersion)
	m["kind"], _ = json.Marshal(tm.Kind)
	return json.Marshal(m)
}

func nameOf(data []byte) string {
	var m struct {
		Metadata struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(data, &m)
	if m.Metadata.Namespace != "" {
		return m.Metadata.Namespace + "/" + m.Metadata.Name
	}
	return m.Metadata.Name
}

func servedVersion(gk schema.GroupKind) string {
	for gvk := range scheme.AllKnownTypes() {
		if gvk.GroupKind() == gk {
			return gvk.GroupVersion().String()
		}
	}
	return "a served version"
}
