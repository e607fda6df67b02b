package keystore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/keystore"
)

func testFiles(t *testing.T, st *keystore.Store) {
	ctx := context.Background()
	content := bytes.Repeat([]byte{0, 1, 2, 0xff, '\n'}, 1000) // binary, not text
	a := keystore.File{ID: "file-a", Owner: "team", Purpose: "batch", Filename: "in.jsonl", Bytes: int64(len(content)), Created: 100}
	if err := st.PutFile(ctx, a, content); err != nil {
		t.Fatal(err)
	}
	if err := st.PutFile(ctx, a, content); !errors.Is(err, keystore.ErrConflict) {
		t.Errorf("put twice: %v, want ErrConflict", err)
	}
	b := keystore.File{ID: "file-b", Owner: "team", Purpose: "batch_output", Filename: "out.jsonl", Bytes: 0, Created: 200}
	if err := st.PutFile(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.PutFile(ctx, keystore.File{ID: "file-c", Owner: "other", Purpose: "batch", Created: 300}, []byte("x")); err != nil {
		t.Fatal(err)
	}
	got, err := st.File(ctx, "file-a")
	if err != nil || got != a {
		t.Fatalf("file %+v %v", got, err)
	}
	c, err := st.FileContent(ctx, "file-a")
	if err != nil || !bytes.Equal(c, content) {
		t.Fatalf("content: %d bytes, %v", len(c), err)
	}
	if c, err := st.FileContent(ctx, "file-b"); err != nil || len(c) != 0 {
		t.Fatalf("empty content: %q %v", c, err)
	}
	list, err := st.Files(ctx, "team", "")
	if err != nil || len(list) != 2 || list[0].ID != "file-b" || list[1].ID != "file-a" {
		t.Fatalf("files: %+v %v", list, err)
	}
	if list, err := st.Files(ctx, "team", "batch"); err != nil || len(list) != 1 || list[0].ID != "file-a" {
		t.Fatalf("files of purpose batch: %+v %v", list, err)
	}
	if err := st.DeleteFile(ctx, "file-a"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteFile(ctx, "file-a"); !errors.Is(err, keystore.ErrNoFile) {
		t.Errorf("delete twice: %v", err)
	}
	if _, err := st.File(ctx, "file-a"); !errors.Is(err, keystore.ErrNoFile) {
		t.Errorf("deleted file: %v", err)
	}
	if _, err := st.FileContent(ctx, "file-a"); !errors.Is(err, keystore.ErrNoFile) {
		t.Errorf("deleted content: %v", err)
	}
}

func testBatches(t *testing.T, st *keystore.Store) {
	ctx := context.Background()
	now := t0
	mk := func(id, owner string, created int64) {
		t.Helper()
		if err := st.CreateBatch(ctx, keystore.Batch{ID: id, Owner: owner, Created: created, State: []byte(`{"id":"` + id + `"}`)}, "r1", now.Add(10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	mk("batch_1", "team", 100)
	mk("batch_2", "team", 200)
	mk("batch_3", "other", 300)
	if err := st.CreateBatch(ctx, keystore.Batch{ID: "batch_1"}, "r1", now); !errors.Is(err, keystore.ErrConflict) {
		t.Errorf("create twice: %v", err)
	}
	list, err := st.Batches(ctx, "team")
	if err != nil || len(list) != 2 || list[0].ID != "batch_2" || list[1].ID != "batch_1" {
		t.Fatalf("batches %+v %v", list, err)
	}
	b, err := st.Batch(ctx, "batch_1")
	if err != nil || b.Holder != "r1" || !b.LeaseUntil.Equal(now.Add(10*time.Second)) || b.Done || b.Cancel != 0 || string(b.State) != `{"id":"batch_1"}` {
		t.Fatalf("batch %+v %v", b, err)
	}
	if _, err := st.Batch(ctx, "batch_none"); !errors.Is(err, keystore.ErrNoBatch) {
		t.Errorf("unknown batch: %v", err)
	}
	// Only the holder saves and appends.
	if err := st.SaveBatch(ctx, "batch_1", "r2", []byte(`{}`), false); !errors.Is(err, keystore.ErrLeaseLost) {
		t.Errorf("save by another: %v", err)
	}
	if err := st.AppendBatchOutput(ctx, "batch_1", "r2", []byte("x\n")); !errors.Is(err, keystore.ErrLeaseLost) {
		t.Errorf("append by another: %v", err)
	}
	if err := st.SaveBatch(ctx, "batch_1", "r1", []byte(`{"status":"in_progress"}`), false); err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := range 5 {
		line := fmt.Appendf(nil, `{"custom_id":"c%d"}`+"\n", i)
		want = append(want, line...)
		if err := st.AppendBatchOutput(ctx, "batch_1", "r1", line); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := st.BatchOutput(ctx, "batch_1"); err != nil || !bytes.Equal(out, want) {
		t.Fatalf("output %q %v", out, err)
	}
	// Cancel: recorded once, seen by the holder's renewal.
	c, err := st.CancelBatch(ctx, "batch_1", now.Add(time.Second))
	if err != nil || c.Cancel != now.Add(time.Second).Unix() {
		t.Fatalf("cancel %+v %v", c, err)
	}
	if c, _ := st.CancelBatch(ctx, "batch_1", now.Add(5*time.Second)); c.Cancel != now.Add(time.Second).Unix() {
		t.Errorf("cancel again moved its time: %d", c.Cancel)
	}
	if cancel, err := st.RenewBatch(ctx, "batch_1", "r1", now, 10*time.Second); err != nil || cancel != now.Add(time.Second).Unix() {
		t.Errorf("renew: %d %v", cancel, err)
	}
	// Done: its output lines are dropped, nothing more is appended, and
	// a cancel changes nothing.
	if err := st.SaveBatch(ctx, "batch_1", "r1", []byte(`{"status":"cancelled"}`), true); err != nil {
		t.Fatal(err)
	}
	if out, err := st.BatchOutput(ctx, "batch_1"); err != nil || len(out) != 0 {
		t.Errorf("output of a done batch: %q %v", out, err)
	}
	if err := st.AppendBatchOutput(ctx, "batch_1", "r1", []byte("x\n")); !errors.Is(err, keystore.ErrLeaseLost) {
		t.Errorf("append to a done batch: %v", err)
	}
	if err := st.SaveBatch(ctx, "batch_1", "r1", []byte(`{}`), false); !errors.Is(err, keystore.ErrLeaseLost) {
		t.Errorf("save of a done batch: %v", err)
	}
	if c, err := st.CancelBatch(ctx, "batch_2", now); err != nil || c.Cancel == 0 {
		t.Fatalf("cancel batch_2: %+v %v", c, err)
	}
	b, _ = st.Batch(ctx, "batch_1")
	if !b.Done || string(b.State) != `{"status":"cancelled"}` {
		t.Errorf("done batch %+v", b)
	}
}

func testBatchLeases(t *testing.T, st *keystore.Store) {
	ctx := context.Background()
	now := t0
	ttl := 10 * time.Second
	for i := range 6 {
		holder, until := "", time.Time{}
		if i == 0 {
			holder, until = "r0", now.Add(ttl) // held, live
		}
		if err := st.CreateBatch(ctx, keystore.Batch{ID: fmt.Sprintf("batch_%d", i), Owner: "o", Created: int64(i), State: []byte("{}")}, holder, until); err != nil {
			t.Fatal(err)
		}
	}
	// Replicas taking at once never get the same batch; the held one is
	// not taken while its lease lasts.
	var mu sync.Mutex
	got := map[string]string{}
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() {
			replica := fmt.Sprintf("r%d", r+1)
			for {
				b, ok, err := st.TakeBatch(ctx, replica, now, ttl)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				if prev, dup := got[b.ID]; dup {
					t.Errorf("%s taken by %s and %s", b.ID, prev, replica)
				}
				got[b.ID] = replica
				mu.Unlock()
				if b.Holder != replica {
					t.Errorf("taken %s holder %q", b.ID, b.Holder)
				}
			}
		})
	}
	wg.Wait()
	if len(got) != 5 || got["batch_0"] != "" {
		t.Fatalf("taken: %v", got)
	}
	// The holder renews; once its lease expires another takes it, and the
	// old holder can renew, save and append no more.
	if _, err := st.RenewBatch(ctx, "batch_0", "r0", now.Add(5*time.Second), ttl); err != nil {
		t.Fatal(err)
	}
	for { // the others' leases have expired by now+12s; batch_0's has not
		x, ok, err := st.TakeBatch(ctx, "r9", now.Add(12*time.Second), ttl)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if x.ID == "batch_0" {
			t.Fatal("a renewed lease was taken")
		}
	}
	later := now.Add(16 * time.Second)
	var b keystore.Batch
	for {
		x, ok, err := st.TakeBatch(ctx, "r9", later, ttl)
		if err != nil || !ok {
			t.Fatalf("take expired: %v %v", ok, err)
		}
		if x.ID == "batch_0" {
			b = x
			break
		}
	}
	if b.Holder != "r9" {
		t.Fatalf("took %+v", b)
	}
	if _, err := st.RenewBatch(ctx, "batch_0", "r0", later, ttl); !errors.Is(err, keystore.ErrLeaseLost) {
		t.Errorf("renew by the old holder: %v", err)
	}
	if err := st.AppendBatchOutput(ctx, "batch_0", "r0", []byte("x\n")); !errors.Is(err, keystore.ErrLeaseLost) {
		t.Errorf("append by the old holder: %v", err)
	}
	// Released, it is free at once.
	if err := st.ReleaseBatch(ctx, "batch_0", "r9"); err != nil {
		t.Fatal(err)
	}
	if b, ok, err := st.TakeBatch(ctx, "r8", later, ttl); err != nil || !ok || b.ID != "batch_0" {
		t.Fatalf("take released: %+v %v %v", b, ok, err)
	}
}
