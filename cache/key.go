package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/chorusrt/chorus/llm"
)

// keyVersion opens every canonical form. Changing the rules changes it, so
// that entries written under old rules are never read under new ones.
const keyVersion = "chorus-cache/v1"

// excluded lists the fields of the request's types that never change the
// answer, as "Type.Field", with the reason. Every other field is part of
// the key: a field added to llm.ChatRequest (or to a type it holds) is
// keyed by default, and TestEveryFieldClassified fails until it is listed
// here or among the keyed fields of the test.
var excluded = map[string]string{
	"ChatRequest.Model":            "replaced by the provider/model that serves the call (Key's target)",
	"ChatRequest.Headers":          "HTTP headers of the call, not read by the model",
	"ChatRequest.Metadata":         "OpenAI's stored-completion labels",
	"ChatRequest.User":             "the end user's id, for the provider's abuse monitoring",
	"ChatRequest.SafetyIdentifier": "the end user's id, for the provider's abuse monitoring",
	"ChatRequest.Store":            "whether the provider keeps the answer, not what it answers",
	"ChatRequest.ServiceTier":      "when and at what price the answer is made, not what it is",
	"PromptCache.Key":              "routing of the provider's prompt cache",
	"PromptCache.Retention":        "lifetime of the provider's prompt cache",
	"Message.Cache":                "a prompt-cache breakpoint: billing, not content",
	"Tool.Cache":                   "a prompt-cache breakpoint: billing, not content",
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	bytesType      = reflect.TypeFor[[]byte]()
	rawFieldsType  = reflect.TypeFor[[]llm.RawField]()
)

// Key returns the cache key of req served by target (the provider/model
// that serves it, or the list of targets an alias tries): the hex SHA-256
// of Canonical(target, req).
func Key(target string, req *llm.ChatRequest) string {
	sum := sha256.Sum256(Canonical(target, req))
	return hex.EncodeToString(sum[:])
}

// Canonical returns the canonical form of req served by target, the text
// Key hashes. The package doc gives its rules.
func Canonical(target string, req *llm.ChatRequest) []byte {
	var b bytes.Buffer
	b.WriteString(keyVersion)
	b.WriteByte('\n')
	b.WriteString(strconv.Quote(target))
	b.WriteByte('\n')
	if req != nil {
		encodeValue(&b, reflect.ValueOf(*req))
	}
	return b.Bytes()
}

// fieldPlan is one keyed field of a struct type: its index and its name
// as a JSON string.
type fieldPlan struct {
	index  int
	quoted string
}

var plans sync.Map // reflect.Type -> []fieldPlan

// planOf returns the keyed fields of struct type t, in declaration order.
func planOf(t reflect.Type) []fieldPlan {
	if p, ok := plans.Load(t); ok {
		return p.([]fieldPlan)
	}
	var p []fieldPlan
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if _, ok := excluded[t.Name()+"."+f.Name]; ok {
			continue
		}
		p = append(p, fieldPlan{index: i, quoted: strconv.Quote(f.Name)})
	}
	plans.Store(t, p)
	return p
}

// encodeValue writes v's canonical JSON.
func encodeValue(b *bytes.Buffer, v reflect.Value) {
	t := v.Type()
	switch {
	case t == rawMessageType:
		encodeRaw(b, v.Bytes())
		return
	case t == bytesType:
		sum := sha256.Sum256(v.Bytes())
		b.WriteString(`"sha256:`)
		b.WriteString(hex.EncodeToString(sum[:]))
		b.WriteByte('"')
		return
	case t == rawFieldsType:
		encodeRawFields(b, v.Interface().([]llm.RawField))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		b.WriteByte('{')
		first := true
		for _, f := range planOf(t) {
			fv := v.Field(f.index)
			if isEmpty(fv) {
				continue
			}
			if fv.Kind() == reflect.Pointer && fv.Elem().Kind() == reflect.Struct {
				// A struct pointer with nothing keyed set is an unset one.
				mark := b.Len()
				if !first {
					b.WriteByte(',')
				}
				b.WriteString(f.quoted)
				b.WriteByte(':')
				body := b.Len()
				encodeValue(b, fv.Elem())
				if b.Len()-body == 2 { // "{}"
					b.Truncate(mark)
					continue
				}
				first = false
				continue
			}
			if !first {
				b.WriteByte(',')
			}
			first = false
			b.WriteString(f.quoted)
			b.WriteByte(':')
			encodeValue(b, fv)
		}
		b.WriteByte('}')
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("null")
			return
		}
		encodeValue(b, v.Elem())
	case reflect.Slice, reflect.Array:
		b.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				b.WriteByte(',')
			}
			encodeValue(b, v.Index(i))
		}
		b.WriteByte(']')
	case reflect.Map:
		keys := v.MapKeys()
		names := make([]string, len(keys))
		for i, k := range keys {
			names[i] = mapKeyString(k)
		}
		order := make([]int, len(keys))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, c int) int { return strings.Compare(names[a], names[c]) })
		b.WriteByte('{')
		for n, i := range order {
			if n > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote(names[i]))
			b.WriteByte(':')
			encodeValue(b, v.MapIndex(keys[i]))
		}
		b.WriteByte('}')
	case reflect.String:
		writeQuoted(b, v.String())
	case reflect.Bool:
		b.WriteString(strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			b.WriteString(strconv.Quote(strconv.FormatFloat(f, 'g', -1, 64)))
			return
		}
		b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	default:
		// No such field in llm today; keyed by its printed form so that a
		// new kind is never silently left out.
		b.WriteString(strconv.Quote(v.Type().String() + ":" + v.String()))
	}
}

func mapKeyString(k reflect.Value) string {
	if k.Kind() == reflect.String {
		return k.String()
	}
	var b bytes.Buffer
	encodeValue(&b, k)
	return b.String()
}

// isEmpty reports a struct field left out of the canonical form: a zero
// scalar, a nil pointer, an empty (or nil) slice or map, a zero struct.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Slice, reflect.Map:
		return v.Len() == 0
	}
	return v.IsZero()
}

// encodeRawFields writes Extra's fields as an array of [name, value] pairs
// sorted by name (the order of a body's top-level fields does not matter).
func encodeRawFields(b *bytes.Buffer, fs []llm.RawField) {
	sorted := slices.Clone(fs)
	slices.SortStableFunc(sorted, func(a, c llm.RawField) int { return strings.Compare(a.Name, c.Name) })
	b.WriteByte('[')
	for i, f := range sorted {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		b.WriteString(strconv.Quote(f.Name))
		b.WriteByte(',')
		encodeRaw(b, f.Value)
		b.WriteByte(']')
	}
	b.WriteByte(']')
}

// encodeRaw writes raw JSON with its objects' keys sorted and without
// insignificant whitespace; numbers keep their literal text. Text that is
// not JSON is keyed as a string of its bytes.
func encodeRaw(b *bytes.Buffer, raw []byte) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		b.WriteString(`{"$invalid":`)
		b.WriteString(strconv.Quote(string(raw)))
		b.WriteByte('}')
		return
	}
	encodeJSON(b, v)
}

func encodeJSON(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case json.Number:
		b.WriteString(string(x))
	case string:
		s, _ := json.Marshal(x)
		b.Write(s)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			encodeJSON(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			s, _ := json.Marshal(k)
			b.Write(s)
			b.WriteByte(':')
			encodeJSON(b, x[k])
		}
		b.WriteByte('}')
	}
}

// writeQuoted writes s as a Go-quoted string without allocating.
func writeQuoted(b *bytes.Buffer, s string) {
	var tmp [128]byte
	b.Write(strconv.AppendQuote(tmp[:0], s))
}
