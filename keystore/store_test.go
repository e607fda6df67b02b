package keystore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/pgtest"
	"github.com/chorusrt/chorus/keystore"
)

func openSQLite(t testing.TB) *keystore.Store {
	t.Helper()
	st, err := keystore.OpenSQLite(filepath.Join(t.TempDir(), "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func openPostgres(t testing.TB) *keystore.Store {
	t.Helper()
	st, err := keystore.OpenPostgres(context.Background(), pgtest.SchemaDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestConformance runs one suite on both stores.
func TestConformance(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(testing.TB) *keystore.Store
	}{{"sqlite", openSQLite}, {"postgres", openPostgres}} {
		t.Run(b.name, func(t *testing.T) {
			t.Run("Keys", func(t *testing.T) { testKeys(t, b.open(t)) })
			t.Run("Rotate", func(t *testing.T) { testRotate(t, b.open(t)) })
			t.Run("Changes", func(t *testing.T) { testChanges(t, b.open(t)) })
			t.Run("Seed", func(t *testing.T) { testSeed(t, b.open(t)) })
			t.Run("ReserveNeverOverruns", func(t *testing.T) { testReserveNeverOverruns(t, b.open(t)) })
			t.Run("Settle", func(t *testing.T) { testSettle(t, b.open(t)) })
			t.Run("Reconcile", func(t *testing.T) { testReconcile(t, b.open(t)) })
			t.Run("Windows", func(t *testing.T) { testWindows(t, b.open(t)) })
			t.Run("Slots", func(t *testing.T) { testSlots(t, b.open(t)) })
			t.Run("Files", func(t *testing.T) { testFiles(t, b.open(t)) })
			t.Run("Batches", func(t *testing.T) { testBatches(t, b.open(t)) })
			t.Run("BatchLeases", func(t *testing.T) { testBatchLeases(t, b.open(t)) })
		})
	}
}

var t0 = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)

func mustCreate(t *testing.T, st *keystore.Store, k keystore.Key) keystore.Key {
	t.Helper()
	c, err := st.Create(context.Background(), k, t0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testKeys(t *testing.T, st *keystore.Store) {
	ctx := context.Background()
	a := mustCreate(t, st, keystore.Key{Name: "alpha", Hash: keystore.HashKey("ka"), Models: []string{"openai/*"}, RPM: 10, BudgetUSD: 2.5, BudgetPeriod: keystore.Monthly})
	if a.ID == "" || a.Rev == 0 || !a.Created.Equal(t0) {
		t.Fatalf("created %+v", a)
	}
	got, err := st.Get(ctx, a.ID)
	if err != nil || got.Name != "alpha" || got.Hash != keystore.HashKey("ka") || got.BudgetUSD != 2.5 || got.BudgetPeriod != keystore.Monthly || len(got.Models) != 1 || got.RPM != 10 {
		t.Fatalf("get %+v %v", got, err)
	}
	for _, k := range []keystore.Key{
		{Name: "alpha", Hash: keystore.HashKey("other")}, // same name
		{Name: "beta", Hash: keystore.HashKey("ka")},     // same hash
	} {
		if _, err := st.Create(ctx, k, t0); !errors.Is(err, keystore.ErrConflict) {
			t.Errorf("create %q: %v, want ErrConflict", k.Name, err)
		}
	}
	var fe *keystore.FieldError
	for field, k := range map[string]keystore.Key{
		"name":          {Hash: keystore.HashKey("x")},
		"rpm":           {Name: "n", Hash: keystore.HashKey("x"), RPM: -1},
		"budget_usd":    {Name: "n", Hash: keystore.HashKey("x"), BudgetUSD: -2},
		"budget_period": {Name: "n", Hash: keystore.HashKey("x"), BudgetPeriod: "week"},
		"hash":          {Name: "n"},
	} {
		if _, err := st.Create(ctx, k, t0); !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("create with bad %s: %v", field, err)
		}
	}
	if _, err := st.Get(ctx, "key_none"); !errors.Is(err, keystore.ErrNotFound) {
		t.Errorf("get unknown: %v", err)
	}
	rpm, budget := 20, 7.0
	u, err := st.Update(ctx, a.ID, keystore.Update{RPM: &rpm, BudgetUSD: &budget}, t0.Add(time.Minute))
	if err != nil || u.RPM != 20 || u.BudgetUSD != 7 || u.Rev <= a.Rev || u.Models[0] != "openai/*" {
		t.Fatalf("update %+v %v", u, err)
	}
	b := mustCreate(t, st, keystore.Key{Name: "beta", Hash: keystore.HashKey("kb")})
	name := "beta"
	if _, err := st.Update(ctx, a.ID, keystore.Update{Name: &name}, t0); !errors.Is(err, keystore.ErrConflict) {
		t.Errorf("rename onto beta: %v", err)
	}
	r, err := st.Revoke(ctx, b.ID, t0.Add(2*time.Minute))
	if err != nil || r.Live() || r.Accepts(keystore.HashKey("kb"), t0.Add(3*time.Minute)) {
		t.Fatalf("revoke %+v %v", r, err)
	}
	if _, err := st.Update(ctx, b.ID, keystore.Update{RPM: &rpm}, t0); !errors.Is(err, keystore.ErrRevoked) {
		t.Errorf("update revoked: %v", err)
	}
	all, err := st.List(ctx)
	if err != nil || len(all) != 2 || all[0].Name != "alpha" || all[1].Name != "beta" {
		t.Fatalf("list %v %v", all, err)
	}
}

func testRotate(t *testing.T, st *keystore.Store) {
	ctx := context.Background()
	k := mustCreate(t, st, keystore.Key{Name: "r", Hash: keystore.HashKey("old")})
	r, err := st.Rotate(ctx, k.ID, keystore.HashKey("new"), time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != k.ID || !r.Accepts(keystore.HashKey("new"), t0) || !r.Accepts(keystore.HashKey("old"), t0.Add(59*time.Minute)) || r.Accepts(keystore.HashKey("old"), t0.Add(time.Hour)) {
		t.Fatalf("rotated %+v", r)
	}
	// The old hash stays taken while it works.
	if _, err := st.Create(ctx, keystore.Key{Name: "s", Hash: keystore.HashKey("old")}, t0); !errors.Is(err, keystore.ErrConflict) {
		t.Errorf("create with a rotated-out hash: %v", err)
	}
	r2, err := st.Rotate(ctx, k.ID, keystore.HashKey("newer"), 0, t0)
	if err != nil || r2.Accepts(keystore.HashKey("new"), t0) || !r2.Accepts(keystore.HashKey("newer"), t0) {
		t.Fatalf("rotate without grace %+v %v", r2, err)
	}
}

func testChanges(t *testing.T, st *keystore.Store) {
	ctx := context.Background()
	_, rev0, err := st.Changes(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	a := mustCreate(t, st, keystore.Key{Name: "a", Hash: keystore.HashKey("a")})
	b := mustCreate(t, st, keystore.Key{Name: "b", Hash: keystore.HashKey("b")})
	if _, err := st.Revoke(ctx, a.ID, t0); err != nil {
		t.Fatal(err)
	}
	ch, rev, err := st.Changes(ctx, rev0)
	if err != nil || len(ch) != 2 || ch[0].ID != b.ID || ch[1].ID != a.ID || ch[1].Live() {
		t.Fatalf("changes %+v %v", ch, err)
	}
	if ch, rev2, _ := st.Changes(ctx, rev); len(ch) != 0 || rev2 != rev {
		t.Fatalf("no change: %v %d", ch, rev2)
	}
}

func testSeed(t *testing.T, st *keystore.Store) {
	ctx := context.Background()
	made, err := st.Seed(ctx, []keystore.Key{{Name: "a", Hash: keystore.HashKey("a"), RPM: 5}}, t0)
	if err != nil || len(made) != 1 {
		t.Fatalf("seed %v %v", made, err)
	}
	rpm := 9
	if _, err := st.Update(ctx, made[0].ID, keystore.Update{RPM: &rpm}, t0); err != nil {
		t.Fatal(err)
	}
	// Seeded again, as at a restart: the store's settings win.
	made, err = st.Seed(ctx, []keystore.Key{{Name: "a", Hash: keystore.HashKey("a"), RPM: 5}, {Name: "b", Hash: keystore.HashKey("b")}}, t0)
	if err != nil || len(made) != 1 || made[0].Name != "b" {
		t.Fatalf("reseed %v %v", made, err)
	}
	if k, _ := st.ByName(ctx, "a"); k.RPM != 9 {
		t.Errorf("reseeding changed a key: rpm %d", k.RPM)
	}
}

// testReserveNeverOverruns: replicas reserving at once from one budget
// are granted at most the budget in all.
func testReserveNeverOverruns(t *testing.T, st *keystore.Store) {
	ctx := context.Background()
	k := mustCreate(t, st, keystore.Key{Name: "b", Hash: keystore.HashKey("b"), BudgetUSD: 1})
	const replicas, each = 4, 40
	var mu sync.Mutex
	var total keystore.NanoUSD
	var wg sync.WaitGroup
	for r := range replicas {
		id := fmt.Sprintf("r%d", r)
		if err := st.Register(ctx, id, t0); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for range each {
				g, err := st.Reserve(ctx, id, k.ID, "", 10_000_000, 30_000_000, t0)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total += g
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if total != keystore.ToNano(1) {
		t.Fatalf("granted %d nUSD of a 1e9 budget", total)
	}
	sp, err := st.SpendOf(ctx, k.ID, "")
	if err != nil || sp.Reserved != total || sp.Spent != 0 {
		t.Fatalf("spend %+v %v", sp, err)
	}
	if g, err := st.Reserve(ctx, "r0", k.ID, "", 1, 1, t0); err != nil || g != 0 {
		t.Fatalf("reserve past the budget: %d %v", g, err)
	}
	// Another period has its own budget.
	if g, _ := st.Reserve(ctx, "r0", k.ID, "2026-12", 5, 5, t0); g != 5 {
		t.Fatalf("another period: %d", g)
	}
}

func testSettle(t *testing.T, st *keystore.Store) {
	ctx := context.Background()
	k := mustCreate(t, st, keystore.Key{Name: "s", Hash: keystore.HashKey("s"), BudgetUSD: 1})
	_ = st.Register(ctx, "a", t0)
	if g, _ := st.Reserve(ctx, "a", k.ID, "", 100, 1000, t0); g != 1000 {
		t.Fatalf("granted %d", g)
	}
	if err := st.Settle(ctx, "a", []keystore.Settlement{{KeyID: k.ID, Spent: 300, Calls: 2, Release: 200}}, t0); err != nil {
		t.Fatal(err)
	}
	sp, _ := st.SpendOf(ctx, k.ID, "")
	if sp.Spent != 300 || sp.Calls != 2 || sp.Reserved != 500 {
		t.Fatalf("after settle %+v", sp)
	}
	if err := st.Settle(ctx, "a", []keystore.Settlement{{KeyID: k.ID, Spent: 500, Calls: 1}}, t0); err != nil {
		t.Fatal(err)
	}
	sp, _ = st.SpendOf(ctx, k.ID, "")
	if sp.Spent != 800 || sp.Calls != 3 || sp.Reserved != 0 {
		t.Fatalf("after settling all %+v", sp)
	}
	// Many replicas settling the same keys at once: no deadlock, no lost
	// increment.
	keys := []string{k.ID, mustCreate(t, st, keystore.Key{Name: "s2", Hash: keystore.HashKey("s2")}).ID}
	var wg sync.WaitGroup
	for r := range 6 {
		id := fmt.Sprintf("m%d", r)
		_ = st.Register(ctx, id, t0)
		wg.Go(func() {
			for i := range 25 {
				sets := []keystore.Settlement{{KeyID: keys[i%2], Spent: 1, Calls: 1}, {KeyID: keys[(i+1)%2], Spent: 1, Calls: 1}}
				if err := st.Settle(ctx, id, sets, t0); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for i, id := range keys {
		sp, _ := st.SpendOf(ctx, id, "")
		want := int64(150)
		if i == 0 {
			want += 800
		}
		if sp.Spent != want || (i == 1 && sp.Calls != 150) {
			t.Errorf("key %d: spent %d calls %d, want %d", i, sp.Spent, sp.Calls, want)
		}
	}
}

func testReconcile(t *testing.T, st *keystore.Store) {
	ctx := context.Background()
	k := mustCreate(t, st, keystore.Key{Name: "c", Hash: keystore.HashKey("c"), BudgetUSD: 1, Concurrency: 4})
	_ = st.Register(ctx, "dead", t0)
	_ = st.Register(ctx, "live", t0)
	if g, _ := st.Reserve(ctx, "dead", k.ID, "", 10, 700, t0); g != 700 {
		t.Fatal(g)
	}
	if g, _ := st.TakeSlots(ctx, "dead", k.ID, 4, 3, t0); g != 3 {
		t.Fatal(g)
	}
	if err := st.Settle(ctx, "dead", []keystore.Settlement{{KeyID: k.ID, Spent: 100, Calls: 1}}, t0); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Minute)
	if err := st.Heartbeat(ctx, "live", later); err != nil {
		t.Fatal(err)
	}
	if n, _ := st.Replicas(ctx, later, 10*time.Second); n != 1 {
		t.Errorf("live replicas %d", n)
	}
	done, err := st.Reconcile(ctx, later, 10*time.Second)
	if err != nil || len(done) != 1 || done[0] != "dead" {
		t.Fatalf("reconciled %v %v", done, err)
	}
	sp, _ := st.SpendOf(ctx, k.ID, "")
	if sp.Spent != 700 || sp.Reserved != 0 || sp.Calls != 1 {
		t.Fatalf("the dead replica's reservation is not counted as spent: %+v", sp)
	}
	if g, _ := st.TakeSlots(ctx, "live", k.ID, 4, 4, later); g != 4 {
		t.Errorf("the dead replica's slots were not freed: got %d", g)
	}
	for name, err := range map[string]error{
		"settle":    st.Settle(ctx, "dead", []keystore.Settlement{{KeyID: k.ID, Spent: 5}}, later),
		"heartbeat": st.Heartbeat(ctx, "dead", later),
	} {
		if !errors.Is(err, keystore.ErrLost) {
			t.Errorf("%s by a reconciled replica: %v, want ErrLost", name, err)
		}
	}
	if _, err := st.Reserve(ctx, "dead", k.ID, "", 1, 1, later); !errors.Is(err, keystore.ErrLost) {
		t.Errorf("reserve by a reconciled replica: %v", err)
	}
	if sp2, _ := st.SpendOf(ctx, k.ID, ""); sp2.Spent != 700 {
		t.Errorf("a lost replica's settlement was applied: %+v", sp2)
	}
	if done, _ := st.Reconcile(ctx, later, 10*time.Second); len(done) != 0 {
		t.Errorf("reconciled twice: %v", done)
	}
}

func testWindows(t *testing.T, st *keystore.Store) {
	ctx := context.Background()
	k := mustCreate(t, st, keystore.Key{Name: "w", Hash: keystore.HashKey("w"), RPM: 10})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int64
	for range 5 {
		wg.Go(func() {
			for range 5 {
				g, _, err := st.Take(ctx, k.ID, "req", 100, 10, 3)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				total += g
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if total != 10 {
		t.Fatalf("took %d of a window of 10", total)
	}
	if g, left, _ := st.Take(ctx, k.ID, "req", 101, 10, 3); g != 3 || left != 7 {
		t.Errorf("next window: %d", g)
	}
}

func testSlots(t *testing.T, st *keystore.Store) {
	ctx := context.Background()
	k := mustCreate(t, st, keystore.Key{Name: "sl", Hash: keystore.HashKey("sl"), Concurrency: 3})
	_ = st.Register(ctx, "a", t0)
	_ = st.Register(ctx, "b", t0)
	if g, _ := st.TakeSlots(ctx, "a", k.ID, 3, 2, t0); g != 2 {
		t.Fatal(g)
	}
	if g, _ := st.TakeSlots(ctx, "b", k.ID, 3, 2, t0); g != 1 {
		t.Fatalf("b got %d of the 1 left", g)
	}
	if err := st.ReleaseSlots(ctx, "a", k.ID, 2); err != nil {
		t.Fatal(err)
	}
	if g, _ := st.TakeSlots(ctx, "b", k.ID, 3, 5, t0); g != 2 {
		t.Fatalf("after a's release b got %d", g)
	}
	if err := st.Retire(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if g, _ := st.TakeSlots(ctx, "a", k.ID, 3, 5, t0); g != 3 {
		t.Fatalf("after b retired a got %d", g)
	}
}
