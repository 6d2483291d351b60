package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// The frozen form of an exception: what engine.CompileException reads from
// a PolicyException (engine.Exception.APIObject), in one string that the
// garbage collector does not look into. See held.go for why the index
// holds exceptions in it.

// frozenVersion is the first byte of a frozen exception.
const frozenVersion = 1

// freezeException is the frozen form of what CompileException reads from
// pe, with the cluster exceptions namespace it was compiled with.
func freezeException(pe *policyv1alpha1.PolicyException, clusterNamespace string) string {
	w := frozenWriter{b: make([]byte, 0, 256)}
	w.b = append(w.b, frozenVersion)
	w.str(clusterNamespace)
	w.str(pe.Namespace)
	w.str(pe.Name)
	w.str(string(pe.UID))
	w.varint(pe.Generation)
	w.time(&pe.CreationTimestamp)
	s := &pe.Spec
	w.count(s.Exceptions == nil, len(s.Exceptions))
	for _, t := range s.Exceptions {
		w.str(t.PolicyName)
		strs(&w, t.RuleNames)
	}
	w.present(s.Match != nil)
	if m := s.Match; m != nil {
		strs(&w, m.Names)
		w.selector(m.Selector)
		strs(&w, m.Kinds)
		strs(&w, m.Namespaces)
		w.selector(m.NamespaceSelector)
	}
	w.count(s.PodSecurity == nil, len(s.PodSecurity))
	for _, x := range s.PodSecurity {
		w.str(string(x.ControlName))
		strs(&w, x.Images)
		strs(&w, x.ContainerNames)
		strs(&w, x.ContainerKinds)
		w.str(x.RestrictedField)
		strs(&w, x.Values)
	}
	w.str(s.Justification)
	w.present(s.ExpiresAt != nil)
	if s.ExpiresAt != nil {
		w.time(s.ExpiresAt)
	}
	switch {
	case s.Background == nil:
		w.b = append(w.b, 0)
	case *s.Background:
		w.b = append(w.b, 2)
	default:
		w.b = append(w.b, 1)
	}
	return string(w.b)
}

// unfreezeException reads what freezeException wrote: the API object, whose
// strings are substrings of src, and the cluster exceptions namespace.
func unfreezeException(src string) (*policyv1alpha1.PolicyException, string, error) {
	r := frozenReader{s: src}
	if r.byte() != frozenVersion {
		return nil, "", fmt.Errorf("frozen exception: unknown version")
	}
	clusterNamespace := r.str()
	pe := &policyv1alpha1.PolicyException{}
	pe.Namespace = r.str()
	pe.Name = r.str()
	pe.UID = types.UID(r.str())
	pe.Generation = r.varint()
	pe.CreationTimestamp = r.time()
	s := &pe.Spec
	if n, ok := r.count(); ok {
		s.Exceptions = make([]policyv1alpha1.ExceptionTarget, n)
		for i := range s.Exceptions {
			s.Exceptions[i].PolicyName = r.str()
			s.Exceptions[i].RuleNames = readStrs[string](&r)
		}
	}
	if r.present() {
		m := &policyv1alpha1.ExceptionMatch{}
		m.Names = readStrs[string](&r)
		m.Selector = r.selector()
		m.Kinds = readStrs[policyv1alpha1.PodBearingKind](&r)
		m.Namespaces = readStrs[string](&r)
		m.NamespaceSelector = r.selector()
		s.Match = m
	}
	if n, ok := r.count(); ok {
		s.PodSecurity = make([]policyv1alpha1.PodSecurityExclusion, n)
		for i := range s.PodSecurity {
			x := &s.PodSecurity[i]
			x.ControlName = policyv1alpha1.ControlName(r.str())
			x.Images = readStrs[string](&r)
			x.ContainerNames = readStrs[string](&r)
			x.ContainerKinds = readStrs[policyv1alpha1.ContainerKind](&r)
			x.RestrictedField = r.str()
			x.Values = readStrs[string](&r)
		}
	}
	s.Justification = r.str()
	if r.present() {
		t := r.time()
		s.ExpiresAt = &t
	}
	switch r.byte() {
	case 0:
	case 1:
		s.Background = new(bool)
	case 2:
		yes := true
		s.Background = &yes
	default:
		r.fail(errors.New("background: not 0, 1 or 2"))
	}
	if r.err == nil && r.i != len(r.s) {
		r.err = errors.New("trailing bytes")
	}
	if r.err != nil {
		return nil, "", fmt.Errorf("frozen exception: %w", r.err)
	}
	return pe, clusterNamespace, nil
}

type frozenWriter struct{ b []byte }

func (w *frozenWriter) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *frozenWriter) varint(v int64)   { w.b = binary.AppendVarint(w.b, v) }

func (w *frozenWriter) str(s string) {
	w.uvarint(uint64(len(s)))
	w.b = append(w.b, s...)
}

// count writes a list's length, telling nil (0) from empty (1).
func (w *frozenWriter) count(isNil bool, n int) {
	if isNil {
		w.uvarint(0)
		return
	}
	w.uvarint(uint64(n) + 1)
}

func (w *frozenWriter) present(ok bool) {
	if ok {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

// time writes an instant: a zero time stays zero.
func (w *frozenWriter) time(t *metav1.Time) {
	w.present(!t.IsZero())
	if !t.IsZero() {
		w.varint(t.Unix())
		w.uvarint(uint64(t.Nanosecond()))
	}
}

func (w *frozenWriter) selector(s *metav1.LabelSelector) {
	w.present(s != nil)
	if s == nil {
		return
	}
	w.count(s.MatchLabels == nil, len(s.MatchLabels))
	for _, k := range slices.Sorted(maps.Keys(s.MatchLabels)) {
		w.str(k)
		w.str(s.MatchLabels[k])
	}
	w.count(s.MatchExpressions == nil, len(s.MatchExpressions))
	for _, e := range s.MatchExpressions {
		w.str(e.Key)
		w.str(string(e.Operator))
		strs(w, e.Values)
	}
}

func strs[T ~string](w *frozenWriter, ss []T) {
	w.count(ss == nil, len(ss))
	for _, s := range ss {
		w.str(string(s))
	}
}

type frozenReader struct {
	s   string
	i   int
	err error
}

var errTruncated = errors.New("truncated")

func (r *frozenReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.i = len(r.s)
}

func (r *frozenReader) byte() byte {
	if r.i >= len(r.s) {
		r.fail(errTruncated)
		return 0
	}
	b := r.s[r.i]
	r.i++
	return b
}

func (r *frozenReader) uvarint() uint64 {
	var v uint64
	for shift := 0; shift < 64; shift += 7 {
		b := r.byte()
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v
		}
	}
	r.fail(errors.New("varint overflows"))
	return 0
}

func (r *frozenReader) varint() int64 {
	u := r.uvarint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

func (r *frozenReader) str() string {
	n := r.uvarint()
	if n > uint64(len(r.s)-r.i) {
		r.fail(errTruncated)
		return ""
	}
	s := r.s[r.i : r.i+int(n)]
	r.i += int(n)
	return s
}

// count reads a list's length; ok is false for nil. A length longer than
// the bytes left is refused before anything is allocated.
func (r *frozenReader) count() (int, bool) {
	n := r.uvarint()
	if n == 0 {
		return 0, false
	}
	if n-1 > uint64(len(r.s)-r.i) {
		r.fail(errTruncated)
		return 0, false
	}
	return int(n - 1), true
}

func (r *frozenReader) present() bool {
	switch r.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail(errors.New("a presence byte not 0 or 1"))
	return false
}

func (r *frozenReader) time() metav1.Time {
	if !r.present() {
		return metav1.Time{}
	}
	sec := r.varint()
	nsec := r.uvarint()
	return metav1.NewTime(time.Unix(sec, int64(nsec)))
}

func (r *frozenReader) selector() *metav1.LabelSelector {
	if !r.present() {
		return nil
	}
	s := &metav1.LabelSelector{}
	if n, ok := r.count(); ok {
		s.MatchLabels = make(map[string]string, n)
		for range n {
			k := r.str()
			s.MatchLabels[k] = r.str()
		}
	}
	if n, ok := r.count(); ok {
		s.MatchExpressions = make([]metav1.LabelSelectorRequirement, n)
		for i := range s.MatchExpressions {
			e := &s.MatchExpressions[i]
			e.Key = r.str()
			e.Operator = metav1.LabelSelectorOperator(r.str())
			e.Values = readStrs[string](r)
		}
	}
	return s
}

func readStrs[T ~string](r *frozenReader) []T {
	n, ok := r.count()
	if !ok {
		return nil
	}
	out := make([]T, n)
	for i := range out {
		out[i] = T(r.str())
	}
	return out
}
