package wire

import (
	"encoding/json"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/jsonscan"
)

// Classified holds a format's field table by name.
type Classified map[string]llm.FieldClass

// NewClassified indexes a field table.
func NewClassified(fields []llm.WireField) Classified {
	c := make(Classified, len(fields))
	for _, f := range fields {
		c[f.Name] = f.Class
	}
	return c
}

// ExtraFields returns the top-level fields of a JSON object body that the
// table does not map or serve: the table's passthrough fields and any it
// does not name (a field newer than the table), as llm.Extra of format.
// It walks the body once without decoding it; only the fields it keeps
// are copied. nil when there are none.
func ExtraFields(body []byte, known Classified, format string) *llm.Extra {
	var extra *llm.Extra
	o := jsonscan.NewObject(body)
	for o.Next() {
		k := o.Key()
		switch known[string(k)] { // the conversion in a map index does not allocate
		case llm.FieldMapped, llm.FieldServed, llm.FieldRefused:
			continue
		}
		name := string(k)
		if strings.IndexByte(name, '\\') >= 0 {
			var s string
			if json.Unmarshal(append(append([]byte{'"'}, k...), '"'), &s) == nil {
				name = s
			}
			switch known[name] {
			case llm.FieldMapped, llm.FieldServed, llm.FieldRefused:
				continue
			}
		}
		if jsonscan.IsNull(o.Value()) || known.folds(name) {
			continue // an explicit null asks for nothing; encoding/json read a known field's other case as it
		}
		if extra == nil {
			extra = &llm.Extra{Format: format}
		}
		extra.Fields = append(extra.Fields, llm.RawField{Name: name, Value: append(json.RawMessage(nil), o.Value()...)})
	}
	return extra
}

// folds reports whether name is a known field in another case, which
// encoding/json decodes as that field.
func (c Classified) folds(name string) bool {
	for k, cls := range c {
		if cls != llm.FieldPassthrough && strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}
