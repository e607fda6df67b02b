package jsonscan

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestObjectWalk(t *testing.T) {
	data := []byte(` { "a" : 1, "b":{"c":[1,2,{"d":"}"}]}, "e":"x\"y", "f":null , "g":true}`)
	o := NewObject(data)
	var keys []string
	vals := map[string]string{}
	for o.Next() {
		keys = append(keys, string(o.Key()))
		vals[string(o.Key())] = string(o.Value())
	}
	if o.Err() != nil {
		t.Fatal(o.Err())
	}
	if len(keys) != 5 || vals["b"] != `{"c":[1,2,{"d":"}"}]}` || vals["e"] != `"x\"y"` || vals["f"] != "null" {
		t.Fatalf("keys=%v vals=%v", keys, vals)
	}
	s, err := String([]byte(vals["e"]))
	if err != nil || s != `x"y` {
		t.Fatalf("String = %q, %v", s, err)
	}
}

func TestStringUnescapeMatchesEncodingJSON(t *testing.T) {
	for _, in := range []string{`"plain"`, `"a\nb\tc"`, `"\u00e9\u4e2d"`, `"\ud83d\ude00 smile"`, `"\/\\\""`, `""`, `"\ud800"`} {
		var want string
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		got, err := String([]byte(in))
		if err != nil || got != want {
			t.Errorf("String(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestMalformed(t *testing.T) {
	for _, in := range []string{`{"a":}`, `{"a" 1}`, `{"a":1,}`, `{"a":"x`, `{`, `[1,2`, `{"a":[}`} {
		o := NewObject([]byte(in))
		for o.Next() {
			if v := o.Value(); IsString(v) || len(v) > 0 && v[0] == '[' {
				a := NewArray(v)
				for a.Next() {
				}
				if a.Err() != nil {
					break
				}
			}
		}
		if o.Err() == nil && Valid([]byte(in)) {
			t.Errorf("%s: accepted as valid", in)
		}
	}
}

func TestIntAndBool(t *testing.T) {
	for in, want := range map[string]int{"12": 12, " -3 ": -3, "null": 0, "": 0, "1.9": 1, "2e2": 200} {
		got, err := Int([]byte(in))
		if err != nil || got != want {
			t.Errorf("Int(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := Int([]byte("abc")); err == nil {
		t.Error("Int(abc) accepted")
	}
	if !Bool([]byte("true")) || Bool([]byte("false")) || Bool(nil) {
		t.Error("Bool")
	}
}

func FuzzWalk(f *testing.F) {
	f.Add([]byte(`{"choices":[{"delta":{"content":"hi \u00e9"}}],"usage":null}`))
	f.Add([]byte(`[1,"a",{"b":[true,false,null]}]`))
	f.Add([]byte(`"caf\u00e9 naïve \"q\"\n" rest`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var walk func(v []byte, depth int)
		walk = func(v []byte, depth int) {
			if depth > 64 {
				return
			}
			o := NewObject(v)
			for o.Next() {
				walk(o.Value(), depth+1)
			}
			a := NewArray(v)
			for a.Next() {
				walk(a.Value(), depth+1)
			}
			s, err := String(v)
			if a, aerr := AppendString([]byte("x"), v); (aerr != nil) != (err != nil) || string(a) != "x"+s {
				t.Fatalf("AppendString(%q) = %q, %v; String gives %q, %v", v, a, aerr, s, err)
			}
			_, _ = Int(v)
		}
		walk(b, 0)
		ps, pn, perr := StringPrefix(b)
		if a, an, aerr := AppendStringPrefix([]byte("x"), b); (aerr != nil) != (perr != nil) || string(a) != "x"+ps || an != pn {
			t.Fatalf("AppendStringPrefix(%q) = %q, %d, %v; StringPrefix gives %q, %d, %v", b, a, an, aerr, ps, pn, perr)
		}
		if json.Valid(b) && !Valid(b) {
			t.Fatalf("valid JSON rejected: %q", b)
		}
		if json.Valid(b) && IsString(b) {
			var want string
			_ = json.Unmarshal(b, &want)
			got, err := String(b)
			if err != nil || got != want {
				t.Fatalf("String(%q) = %q, %v; want %q", b, got, err, want)
			}
		}
	})
}

func TestSkipStringEscapesAcrossTheFastPath(t *testing.T) {
	for n := 0; n < 40; n++ {
		for _, tail := range []string{`\\`, `\"`, `\\\"`, `\\\\`, `a\"b`, `\u0041`} {
			in := `"` + strings.Repeat("x", n) + tail + `"`
			var want string
			if err := json.Unmarshal([]byte(in), &want); err != nil {
				t.Fatal(err)
			}
			end, err := skipString([]byte(in+`,"k"`), 0)
			if err != nil || end != len(in) {
				t.Fatalf("skipString(%s) = %d, %v; want %d", in, end, err, len(in))
			}
			got, err := String([]byte(in))
			if err != nil || got != want {
				t.Fatalf("String(%s) = %q; want %q", in, got, want)
			}
		}
	}
}

// keysDeep lists every key path, walking containers in place when inPlace
// is set and through raw values otherwise; both walks must agree.
func keysDeep(data []byte, inPlace bool, stopEarly bool) ([]string, error) {
	var out []string
	var walkObj func(o *Object, prefix string, depth int) error
	var walkArr func(a *Array, prefix string, depth int) error
	walkVal := func(v []byte, sub func() (Object, Array), prefix string, depth int, co **Object, ca **Array) error {
		if depth > 32 {
			return nil
		}
		i := skipSpace(v, 0)
		if i >= len(v) {
			return nil
		}
		switch v[i] {
		case '{':
			var o Object
			if inPlace {
				o, _ = sub()
				*co = &o
			} else {
				o = NewObject(v)
			}
			return walkObj(&o, prefix, depth+1)
		case '[':
			var a Array
			if inPlace {
				_, a = sub()
				*ca = &a
			} else {
				a = NewArray(v)
			}
			return walkArr(&a, prefix, depth+1)
		}
		return nil
	}
	walkObj = func(o *Object, prefix string, depth int) error {
		n := 0
		for o.Next() {
			k := prefix + "." + string(o.Key())
			out = append(out, k)
			if stopEarly && n == 1 {
				continue // leave this member unwalked: the parent must skip it
			}
			n++
			peek := o.b
			start := o.c.vs
			var raw []byte
			if !inPlace {
				raw = o.Value()
			} else if start < len(peek) {
				raw = peek[start:]
			}
			var child *Object
			var childA *Array
			if err := walkVal(raw, func() (Object, Array) {
				if peek[start] == '{' {
					return o.Object(), Array{}
				}
				return Object{}, o.Array()
			}, k, depth, &child, &childA); err != nil {
				return err
			}
			if child != nil {
				o.Consumed(child.End())
			} else if childA != nil {
				o.Consumed(childA.End())
			}
		}
		return o.Err()
	}
	walkArr = func(a *Array, prefix string, depth int) error {
		for a.Next() {
			k := fmt.Sprintf("%s[%d]", prefix, a.Index())
			out = append(out, k)
			peek := a.b
			start := a.c.vs
			var raw []byte
			if !inPlace {
				raw = a.Value()
			} else {
				raw = peek[start:]
			}
			var child *Object
			var childA *Array
			if err := walkVal(raw, func() (Object, Array) {
				if peek[start] == '{' {
					return a.Object(), Array{}
				}
				return Object{}, a.Array()
			}, k, depth, &child, &childA); err != nil {
				return err
			}
			if child != nil {
				a.Consumed(child.End())
			} else if childA != nil {
				a.Consumed(childA.End())
			}
		}
		return a.Err()
	}
	o := NewObject(data)
	err := walkObj(&o, "", 0)
	return out, err
}

func TestInPlaceDescentMatchesRawWalk(t *testing.T) {
	data := []byte(`{"id":"x","choices":[{"index":0,"delta":{"content":"hi","tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":null},{"index":1}],"usage":{"prompt_tokens":3},"tail":[[1,[2]],{}]}`)
	for _, early := range []bool{false, true} {
		raw, err1 := keysDeep(data, false, early)
		inPlace, err2 := keysDeep(data, true, early)
		if err1 != nil || err2 != nil || strings.Join(raw, " ") != strings.Join(inPlace, " ") {
			t.Fatalf("early=%v\nraw     %v %v\ninPlace %v %v", early, raw, err1, inPlace, err2)
		}
	}
	// After a child walk the parent's Value still returns the whole member.
	o := NewObject(data)
	for o.Next() {
		if o.KeyIs("usage") {
			in := o.Object()
			for in.Next() {
			}
			o.Consumed(in.End())
			if string(o.Value()) != `{"prompt_tokens":3}` {
				t.Fatalf("Value after descent = %s", o.Value())
			}
		}
	}
}

func FuzzInPlaceDescent(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[1,{"c":"d"}],"e":null},"f":[[],{}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		raw, err1 := keysDeep(b, false, false)
		inPlace, err2 := keysDeep(b, true, false)
		if (err1 == nil) != (err2 == nil) {
			if json.Valid(b) {
				t.Fatalf("walks disagree on valid JSON %q: %v vs %v", b, err1, err2)
			}
			return
		}
		// On malformed input (e.g. mismatched brackets, which the scanner
		// does not check inside a skipped value) the walks may differ; both
		// must only end without panicking. On valid JSON they agree.
		if err1 == nil && json.Valid(b) && strings.Join(raw, " ") != strings.Join(inPlace, " ") {
			t.Fatalf("walks differ on %q:\n%v\n%v", b, raw, inPlace)
		}
	})
}
