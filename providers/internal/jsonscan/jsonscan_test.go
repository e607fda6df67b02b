package jsonscan

import (
	"encoding/json"
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
			_, _ = String(v)
			_, _ = Int(v)
		}
		walk(b, 0)
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
