package jsonscan

import (
	"strings"
	"testing"
)

func TestResumeObject(t *testing.T) {
	data := []byte(`{"id":"x","created":17,"choices":[1,{"a":"}"}],"usage":null}`)
	at := strings.Index(string(data), `,"choices"`)
	o := ResumeObject(data, at)
	var keys []string
	for o.Next() {
		keys = append(keys, string(o.Key())+"="+string(o.Value()))
	}
	if o.Err() != nil {
		t.Fatal(o.Err())
	}
	if got := strings.Join(keys, " "); got != `choices=[1,{"a":"}"}] usage=null` {
		t.Fatalf("members after resume: %s", got)
	}
	if o.End() != len(data) {
		t.Fatalf("End = %d, want %d", o.End(), len(data))
	}

	// An offset inside a number that goes on, past the end, or at the
	// start cannot resume.
	for _, bad := range []int{at - 1, 0, -1, len(data), len(data) + 3} {
		o := ResumeObject(data, bad)
		if o.Next() || o.Err() != ErrSyntax {
			t.Fatalf("ResumeObject(data, %d): Next ran or err = %v", bad, o.Err())
		}
	}
	// A resumed object still checks what follows.
	o = ResumeObject([]byte(`{"a":1 "b":2}`), 6)
	if o.Next() || o.Err() != ErrSyntax {
		t.Fatalf("missing comma accepted: err = %v", o.Err())
	}
}

func TestKeyStart(t *testing.T) {
	data := []byte(`{ "a":1 , "bb" :{"c":2}}`)
	o := NewObject(data)
	var starts []int
	for o.Next() {
		starts = append(starts, o.KeyStart())
		if data[o.KeyStart()] != '"' || string(data[o.KeyStart()+1:o.KeyStart()+1+len(o.Key())]) != string(o.Key()) {
			t.Fatalf("KeyStart %d does not point at key %q", o.KeyStart(), o.Key())
		}
	}
	if len(starts) != 2 || starts[0] != 2 || starts[1] != 10 {
		t.Fatalf("key starts = %v", starts)
	}
}

func TestStringPrefix(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		n    int
		ok   bool
	}{
		{`"a\"b"},"x"`, `a"b`, 6, true},
		{`""rest`, ``, 2, true},
		{`"caf\u00e9" `, `café`, 11, true},
		{` "a"`, ``, 0, false},
		{`"open`, ``, 0, false},
		{`"bad \q"`, ``, 0, false},
		{`null`, ``, 0, false},
	} {
		s, n, err := StringPrefix([]byte(tc.in))
		if (err == nil) != tc.ok || s != tc.want || n != tc.n {
			t.Errorf("StringPrefix(%q) = %q, %d, %v; want %q, %d, ok=%v", tc.in, s, n, err, tc.want, tc.n, tc.ok)
		}
	}
}

// TestAppendStringMatchesString checks that AppendString and
// AppendStringPrefix decode what String and StringPrefix do, appended after
// what dst held, and leave dst's contents alone on error.
func TestAppendStringMatchesString(t *testing.T) {
	for _, in := range []string{
		`"plain"`, ` "spaced"`, `""`, `null`, ``, `"a\nb\tc"`, `"\u00e9\u4e2d"`, `"café naïve"`,
		`"\ud83d\ude00 smile"`, `"\/\\\""`, `"\ud800"`, "\"bad \xff utf8\"", "\"ctl \x01\"",
		`"bad \q"`, `"open`, `17`, `"a" ,`,
		// Around the byte-by-byte fast path's reach (shortString).
		`"` + strings.Repeat("a", shortString-1) + `"`, `"` + strings.Repeat("b", shortString) + `"`,
		`"` + strings.Repeat("c", shortString+1) + `"x`, `"` + strings.Repeat("d", shortString) + `\n"`,
		`"` + strings.Repeat("e", shortString-1) + `é"`, `"` + strings.Repeat("f", shortString+5),
		`"` + strings.Repeat("g", shortString-2) + "\x01\"", `"` + strings.Repeat("h", 3*shortString) + `\u00e9 \"q\""`,
	} {
		want, wantErr := String([]byte(in))
		dst := []byte("kept|")
		got, err := AppendString(dst, []byte(in))
		if (err != nil) != (wantErr != nil) || string(got) != "kept|"+want {
			t.Errorf("AppendString(%q) = %q, %v; want %q, %v", in, got, err, "kept|"+want, wantErr)
		}
		ws, wn, wantErr := StringPrefix([]byte(in))
		got, n, err := AppendStringPrefix(dst, []byte(in))
		if (err != nil) != (wantErr != nil) || string(got) != "kept|"+ws || n != wn {
			t.Errorf("AppendStringPrefix(%q) = %q, %d, %v; want %q, %d, %v", in, got, n, err, "kept|"+ws, wn, wantErr)
		}
	}
}
