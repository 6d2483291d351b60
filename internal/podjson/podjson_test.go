package podjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/randfill"
	"sigs.k8s.io/yaml"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/upstreamfixtures"
)

var podGVK = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}

// strict is the webhook's fallback: the strict reflective decoder. ok is
// false when it refuses the input or reports a field it does not know.
func strict(t testing.TB, raw []byte, gvk schema.GroupVersionKind) (runtime.Object, bool) {
	t.Helper()
	obj, err := clientgoscheme.Scheme.New(gvk)
	if err != nil {
		t.Fatal(err)
	}
	errs, err := kjson.UnmarshalStrict(raw, obj, kjson.DisallowUnknownFields)
	return obj, err == nil && len(errs) == 0
}

// same fails unless the generated decoder read raw as the strict decoder
// does.
func same(t testing.TB, name string, raw []byte, gvk schema.GroupVersionKind) {
	t.Helper()
	want, ok := strict(t, raw, gvk)
	if !ok {
		t.Fatalf("%s: the strict decoder refuses it", name)
	}
	got, ok := Decode(raw, gvk)
	if !ok {
		t.Fatalf("%s: Decode refused what the strict decoder reads", name)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: Decode read\n%+v\nthe strict decoder\n%+v", name, got, want)
	}
}

// wrap puts a pod's metadata and spec where kind k holds its template.
func wrap(t testing.TB, k engine.PodBearingKind, pod map[string]any) []byte {
	t.Helper()
	obj := map[string]any{"apiVersion": k.GroupVersion.String(), "kind": string(k.Kind)}
	if k.FieldPrefix == "" {
		for key, v := range pod {
			obj[key] = v
		}
	} else {
		obj["metadata"] = map[string]any{"name": "w", "namespace": "ns"}
		cur := obj
		for _, f := range strings.Split(strings.TrimSuffix(k.FieldPrefix, "."), ".") {
			next := map[string]any{}
			cur[f] = next
			cur = next
		}
		cur["metadata"], cur["spec"] = pod["metadata"], pod["spec"]
	}
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// canonical is raw as the API server would send it: decoded and encoded
// again, so with its defaults' empty values, each key once.
func canonical(t testing.TB, raw []byte, gvk schema.GroupVersionKind) []byte {
	t.Helper()
	obj, _ := strict(t, raw, gvk)
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeFixtures: every upstream Pod Security fixture, as a Pod and
// inside every pod-bearing kind, and every object of the mesh injectors'
// output, decodes as the strict decoder decodes it.
func TestDecodeFixtures(t *testing.T) {
	fixtures, err := upstreamfixtures.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fixtures {
		raw, err := yaml.YAMLToJSON(f.Data)
		if err != nil {
			t.Fatalf("%s: %v", f.Rel, err)
		}
		raw = canonical(t, raw, podGVK)
		var pod map[string]any
		if err := json.Unmarshal(raw, &pod); err != nil {
			t.Fatalf("%s: %v", f.Rel, err)
		}
		for _, k := range engine.PodBearingKinds {
			same(t, f.Rel+" as "+string(k.Kind), wrap(t, k, pod), k.GroupVersionKind())
		}
	}
	if len(fixtures) != upstreamfixtures.Count {
		t.Fatalf("read %d fixtures, want the %d upstream ships", len(fixtures), upstreamfixtures.Count)
	}
	meshes, err := filepath.Glob("../../cmd/podsieve/testdata/meshes/*.yaml")
	if err != nil || len(meshes) == 0 {
		t.Fatalf("no mesh testdata: %v", err)
	}
	objects := 0
	for _, path := range meshes {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(b, []byte("\n---")) {
			raw, err := yaml.YAMLToJSON(doc)
			if err != nil {
				t.Fatalf("%s document %d: %v", path, i, err)
			}
			var tm metav1.TypeMeta
			_ = json.Unmarshal(raw, &tm)
			k, ok := engine.KindFor(tm.GroupVersionKind().GroupKind())
			if !ok || tm.GroupVersionKind() != k.GroupVersionKind() {
				continue
			}
			same(t, path, canonical(t, raw, k.GroupVersionKind()), k.GroupVersionKind())
			objects++
		}
	}
	if objects == 0 {
		t.Fatal("read no pod-bearing object of the mesh testdata")
	}
}

// TestDecodeRandomObjects: objects of every pod-bearing kind with every
// field filled at random, as the API server would encode them, decode as
// the strict decoder decodes them.
func TestDecodeRandomObjects(t *testing.T) {
	f := randfill.NewWithSeed(1).NilChance(0.3).NumElements(0, 2).MaxDepth(12).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewMilliQuantity(c.Int63n(1<<40), resource.DecimalSI)
		},
		func(f *metav1.FieldsV1, c randfill.Continue) { f.SetRawString(`{"f:spec":{}}`) },
		func(s *string, c randfill.Continue) {
			// Escapes, non-ASCII and invalid UTF-8, which both replace.
			*s = c.String(0) + []string{"", `"\`, "é\u2028", "\xff", "</script>"}[c.Intn(5)]
		},
	)
	for _, k := range engine.PodBearingKinds {
		for i := range 300 {
			obj, err := clientgoscheme.Scheme.New(k.GroupVersionKind())
			if err != nil {
				t.Fatal(err)
			}
			f.Fill(obj)
			obj.GetObjectKind().SetGroupVersionKind(k.GroupVersionKind())
			raw, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			same(t, string(k.Kind)+" "+string(rune('0'+i%10)), raw, k.GroupVersionKind())
		}
	}
}

// TestDecodeRefuses: what the generated decoders do not read completely goes
// to the strict decoder.
func TestDecodeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  string
		gvk  schema.GroupVersionKind
	}{
		{"unknown field", `{"spec":{"containers":[{"name":"a","image":"b","newField":1}]}}`, podGVK},
		{"unknown volume source", `{"spec":{"volumes":[{"name":"v","futureVolume":{"path":"/"}}]}}`, podGVK},
		{"null map value (the strict decoder reads it as \"\")", `{"spec":{"nodeSelector":{"a":null}}}`, podGVK},
		{"unknown field with a null value", `{"spec":{"futureField":null}}`, podGVK},
		{"unknown top-level field", `{"kind":"Pod","apiVersion":"v1","extra":{}}`, podGVK},
		{"field in another case", `{"spec":{"HostNetwork":true}}`, podGVK},
		{"wrong type", `{"spec":{"hostNetwork":"yes"}}`, podGVK},
		{"number out of range", `{"spec":{"securityContext":{"runAsUser":99999999999999999999}}}`, podGVK},
		{"fraction for an integer", `{"spec":{"securityContext":{"runAsUser":1.5}}}`, podGVK},
		{"malformed", `{"spec":{"containers":[}`, podGVK},
		{"trailing data", `{"spec":{}} {"spec":{"hostPID":true}}`, podGVK},
		{"invalid UTF-8", "{\"metadata\":{\"name\":\"a\xff\"}}", podGVK},
		{"not an object", `[]`, podGVK},
		{"kind without a decoder", `{}`, schema.GroupVersionKind{Group: "apps", Version: "v1beta2", Kind: "Deployment"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := Decode([]byte(tc.raw), tc.gvk); ok {
				t.Fatalf("Decode read %s", tc.raw)
			}
		})
	}
}

// TestDecodeReadsAsStrict: inputs at the edges of what the API server
// sends, read exactly as the strict decoder reads them.
func TestDecodeReadsAsStrict(t *testing.T) {
	for _, tc := range []struct{ name, raw string }{
		{"empty maps", `{"metadata":{"labels":{},"annotations":{}},"spec":{"nodeSelector":{},"overhead":{},"containers":[{"name":"a","resources":{"limits":{},"requests":{}}}]}}`},
		{"empty lists", `{"spec":{"containers":[],"initContainers":[],"volumes":[],"securityContext":{"sysctls":[]}}}`},
		{"nulls", `{"metadata":null,"spec":{"securityContext":null,"containers":[{"name":"a","securityContext":{"capabilities":{"add":null}}}]}}`},
		{"null in a list", `{"spec":{"containers":[null,{"name":"b"}]}}`},
		{"escaped keys and values", `{"spec":{"host\u004eetwork":true,"containers":[{"name":"\u00e9\ud83d\ude00","image":"a\/b"}]}}`},
		{"numbers", `{"spec":{"securityContext":{"runAsUser":-0,"runAsGroup":9223372036854775807},"containers":[{"name":"a","ports":[{"containerPort":80,"hostPort":0}]}]}}`},
		{"quantities, times and int-or-strings", `{"metadata":{"creationTimestamp":"2026-11-23T00:00:00Z","deletionTimestamp":null},"spec":{"containers":[{"name":"a","resources":{"limits":{"cpu":1,"memory":"1Gi"}},"livenessProbe":{"httpGet":{"port":"http"}},"readinessProbe":{"tcpSocket":{"port":8080}}}]}}`},
		{"whitespace", " \n\t{ \"spec\" : { \"hostPID\" : true } } \n"},
		{"an empty document object", `{}`},
		{"null", `null`},
	} {
		t.Run(tc.name, func(t *testing.T) { same(t, tc.name, []byte(tc.raw), podGVK) })
	}
}

// TestDecodeRefusesUnknownNullEverywhere: at every place an object of the
// pod-bearing kinds holds a struct, an unknown field, even with a null
// value, sends the review to the strict decoder, which reports it (the
// generator patches easyjson's decoders, which skip a null before they
// look at its key).
func TestDecodeRefusesUnknownNullEverywhere(t *testing.T) {
	unmarshaler := reflect.TypeFor[json.Unmarshaler]()
	places := 0
	for _, k := range engine.PodBearingKinds {
		obj, err := clientgoscheme.Scheme.New(k.GroupVersionKind())
		if err != nil {
			t.Fatal(err)
		}
		seen := map[reflect.Type]bool{}
		// walk calls visit with the JSON of a document that holds inner at
		// every place a struct of type t can be, for each struct type once.
		var walk func(t reflect.Type, wrap func(inner string) string)
		walk = func(typ reflect.Type, wrap func(string) string) {
			for typ.Kind() == reflect.Pointer {
				typ = typ.Elem()
			}
			switch typ.Kind() {
			case reflect.Slice:
				walk(typ.Elem(), func(inner string) string { return wrap("[" + inner + "]") })
				return
			case reflect.Map:
				walk(typ.Elem(), func(inner string) string { return wrap(`{"k":` + inner + "}") })
				return
			case reflect.Struct:
			default:
				return
			}
			if seen[typ] || reflect.PointerTo(typ).Implements(unmarshaler) {
				return
			}
			seen[typ] = true
			raw := []byte(wrap(`{"zzUnknown":null}`))
			if _, ok := Decode(raw, k.GroupVersionKind()); ok {
				t.Errorf("%s: Decode accepts an unknown field with a null value in a %s: %s", k.Kind, typ, raw)
			}
			places++
			var fields func(typ reflect.Type)
			fields = func(typ reflect.Type) {
				for i := range typ.NumField() {
					f := typ.Field(i)
					name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
					if name == "-" || !f.IsExported() {
						continue
					}
					if f.Anonymous && name == "" {
						fields(f.Type) // inline: its fields are the struct's
						continue
					}
					walk(f.Type, func(inner string) string { return wrap(`{"` + name + `":` + inner + "}") })
				}
			}
			fields(typ)
		}
		walk(reflect.TypeOf(obj), func(inner string) string { return inner })
	}
	if places < 100 {
		t.Fatalf("tried %d places, want every struct of the pod-bearing kinds", places)
	}
}

// TestDecodersCoverEveryKind: every pod-bearing kind has a generated decoder.
func TestDecodersCoverEveryKind(t *testing.T) {
	for _, k := range engine.PodBearingKinds {
		if _, ok := decoders[k.GroupVersionKind()]; !ok {
			t.Errorf("no decoder for %s: run make generate", k.GroupVersionKind())
		}
	}
	if len(decoders) != len(engine.PodBearingKinds) {
		t.Errorf("%d decoders for %d kinds: run make generate", len(decoders), len(engine.PodBearingKinds))
	}
}

// FuzzDecode: on any document an encoder can write (valid JSON, each key
// once per object), Decode either refuses or reads what the strict decoder
// reads.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","annotations":{"a":"b"}},"spec":{"hostNetwork":true,"containers":[{"name":"c","image":"i","securityContext":{"capabilities":{"add":["NET_ADMIN"]},"runAsUser":0}}],"volumes":[{"name":"v","hostPath":{"path":"/"}}]}}`,
		`{"spec":{"initContainers":[{"name":"istio-init","restartPolicy":"Always","resources":{"limits":{"cpu":"100m"}},"ports":[{"containerPort":80,"hostPort":80}]}],"securityContext":{"seccompProfile":{"type":"RuntimeDefault"},"sysctls":[{"name":"a","value":"b"}]}}}`,
		`{"metadata":{"name":"p\u00e9\ud83d\ude00","labels":{}},"spec":{"containers":null,"volumes":[{"name":"v","emptyDir":{"sizeLimit":"1Gi"}}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) || repeatsKey(raw) {
			return
		}
		got, ok := Decode(raw, podGVK)
		if !ok {
			return
		}
		want, ok := strict(t, raw, podGVK)
		if !ok {
			t.Fatalf("Decode read what the strict decoder refuses: %q", raw)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode read\n%+v\nthe strict decoder\n%+v\nfrom %q", got, want, raw)
		}
	})
}

// repeatsKey reports whether an object of the JSON document raw has a key
// twice.
func repeatsKey(raw []byte) bool {
	type frame struct {
		keys    map[string]bool // nil for an array
		wantKey bool
	}
	var stack []*frame
	ended := func() { // a value ended: the object around it wants a key
		if len(stack) > 0 && stack[len(stack)-1].keys != nil {
			stack[len(stack)-1].wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if n := len(stack); n > 0 && stack[n-1].wantKey {
			if k, ok := tok.(string); ok {
				if stack[n-1].keys[k] {
					return true
				}
				stack[n-1].keys[k], stack[n-1].wantKey = true, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			ended()
		default:
			ended()
		}
	}
}

func TestRepeatsKey(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]}`: false,
		`{"a":1,"a":2}`:            true,
		`{"a":{"b":1,"b":2}}`:      true,
		`{"a":[{"b":{}, "b":1}]}`:  true,
		`{"a":{},"b":[],"a":null}`: true,
		`[{"a":1},{"a":1}]`:        false,
	} {
		if got := repeatsKey([]byte(raw)); got != want {
			t.Errorf("repeatsKey(%s) = %v, want %v", raw, got, want)
		}
	}
}

// BenchmarkDecode: the generated decoder and the strict reflective one on
// objects as the API server sends them, small (the load test's pod) and
// large (Istio's injected Deployment, sidecar and init container).
//
//	go test ./internal/podjson -run '^$' -bench BenchmarkDecode -benchmem -count 4
func BenchmarkDecode(b *testing.B) {
	small := []byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"app-0-exempted","namespace":"ns-0","labels":{"app":"web"}},"spec":{"initContainers":[{"name":"istio-init","image":"docker.io/istio/proxyv2:1.24.0","resources":{},"securityContext":{"capabilities":{"add":["NET_ADMIN","NET_RAW"]}}}],"containers":[{"name":"app","image":"nginx:1.25","resources":{}}]},"status":{}}`)
	y, err := os.ReadFile("../../cmd/podsieve/testdata/meshes/istio-sidecar.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var large []byte
	var largeGVK schema.GroupVersionKind
	for _, doc := range bytes.Split(y, []byte("\n---")) {
		raw, err := yaml.YAMLToJSON(doc)
		if err != nil {
			b.Fatal(err)
		}
		var tm metav1.TypeMeta
		_ = json.Unmarshal(raw, &tm)
		if k, ok := engine.KindFor(tm.GroupVersionKind().GroupKind()); ok && k.GroupVersionKind() == tm.GroupVersionKind() {
			large, largeGVK = canonical(b, raw, k.GroupVersionKind()), k.GroupVersionKind()
			break
		}
	}
	if large == nil {
		b.Fatal("no pod-bearing object in istio-sidecar.yaml")
	}
	for _, obj := range []struct {
		name string
		raw  []byte
		gvk  schema.GroupVersionKind
	}{{"small-pod", small, podGVK}, {"istio-" + strings.ToLower(largeGVK.Kind), large, largeGVK}} {
		b.Run(fmt.Sprintf("object=%s/decoder=generated", obj.name), func(b *testing.B) {
			b.SetBytes(int64(len(obj.raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := Decode(obj.raw, obj.gvk); !ok {
					b.Fatal("refused")
				}
			}
		})
		b.Run(fmt.Sprintf("object=%s/decoder=strict", obj.name), func(b *testing.B) {
			b.SetBytes(int64(len(obj.raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := strict(b, obj.raw, obj.gvk); !ok {
					b.Fatal("refused")
				}
			}
		})
	}
}
