package wire

import "testing"

func TestToolAssembler(t *testing.T) {
	var a ToolAssembler
	steps := []struct {
		choice, index int
		id            string
		pos           int
		isNew         bool
	}{
		{0, 0, "call_a", 0, true},
		{0, 0, "", 0, false},       // continuation without id
		{0, 0, "call_a", 0, false}, // gateway repeats the id
		{0, 1, "call_b", 1, true},
		{0, 0, "call_c", 2, true}, // index reused with a new id
		{0, 0, "", 2, false},
		{1, 0, "call_d", 3, true}, // another choice
	}
	for i, s := range steps {
		pos, isNew := a.Lookup(s.choice, s.index, s.id)
		if pos != s.pos || isNew != s.isNew {
			t.Fatalf("step %d: Lookup(%d,%d,%q) = %d,%v; want %d,%v", i, s.choice, s.index, s.id, pos, isNew, s.pos, s.isNew)
		}
	}
}
