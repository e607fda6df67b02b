package pipeline

import (
	"context"
	"errors"

	"github.com/chorusrt/chorus/llm"
)

// Race sends req to every model at once (buffered Chat calls) and returns
// the first complete answer and the model that gave it; the other calls are
// cancelled at that moment. Race returns only once every call has returned,
// so no goroutine outlives it. A model that fails does not end the race;
// if every model fails, the failures are returned joined, each a
// *ModelError. A cancelled ctx ends the race with the context's error.
func Race(ctx context.Context, c Client, req *llm.ChatRequest, models ...string) (*llm.ChatResult, string, error) {
	if len(models) == 0 {
		return nil, "", errNoModels()
	}
	if err := checkCall(c, req); err != nil {
		return nil, "", err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		i   int
		res *llm.ChatResult
		err error
	}
	answers := make(chan answer, len(models))
	for i, m := range models {
		go func() {
			res, err := safeChat(rctx, c, withModel(req, m))
			answers <- answer{i: i, res: res, err: err}
		}()
	}
	errs := make([]error, len(models))
	winner := -1
	var won *llm.ChatResult
	for range models {
		a := <-answers
		switch {
		case a.err == nil && winner < 0:
			winner, won = a.i, a.res
			cancel()
		case a.err != nil:
			errs[a.i] = a.err
		}
	}
	if winner >= 0 {
		return won, models[winner], nil
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	return nil, "", joinModelErrors(models, errs)
}

// safeChat calls c.Chat, turning a panic into a *PanicError and a nil
// answer into an error.
func safeChat(ctx context.Context, c Client, req *llm.ChatRequest) (res *llm.ChatResult, err error) {
	defer recoverTo(&err)
	res, err = c.Chat(ctx, req)
	if err == nil && res == nil {
		err = &llm.ConfigError{Field: "client", Msg: "returned no result and no error"}
	}
	return res, err
}

func checkCall(c Client, req *llm.ChatRequest) error {
	switch {
	case c == nil:
		return &llm.ConfigError{Field: "client", Msg: "is nil"}
	case req == nil:
		return &llm.ConfigError{Field: "request", Msg: "is nil"}
	}
	return nil
}

// Fallback streams req from the first model that answers: it tries each
// model in order, moving to the next when a model fails before its first
// event. Once an event has reached the returned stream the model is kept:
// a later failure ends the stream with a *llm.StreamError holding the
// partial answer, and no other model is tried (the caller has already seen
// output). When every model fails, the stream's error joins the failures,
// each a *ModelError. The answer's Model field names the model that served.
//
// The returned stream is an ordinary llm.Stream: Close it, cancel ctx or
// break out of All to stop it. An error is returned only for an empty model
// list, a nil client or a nil request.
func Fallback(ctx context.Context, c Client, req *llm.ChatRequest, models ...string) (*llm.Stream, error) {
	if len(models) == 0 {
		return nil, errNoModels()
	}
	if err := checkCall(c, req); err != nil {
		return nil, err
	}
	s, w, sctx := llm.NewStream(ctx, DefaultBranchBuffer)
	go func() {
		errs := make([]error, len(models))
		for i, m := range models {
			res, started, err := fallbackAttempt(sctx, c, req, m, w)
			if err == nil || started {
				w.Finish(res, err)
				return
			}
			errs[i] = err
			if cerr := sctx.Err(); cerr != nil {
				w.Finish(nil, cerr)
				return
			}
		}
		w.Finish(nil, joinModelErrors(models, errs))
	}()
	return s, nil
}

// fallbackAttempt streams one model into w and reports whether any event
// was forwarded.
func fallbackAttempt(ctx context.Context, c Client, req *llm.ChatRequest, model string, w *llm.StreamWriter) (*llm.ChatResult, bool, error) {
	src, err := openStream(ctx, c, req, model)
	if err != nil {
		return nil, false, err
	}
	started := false
	for ev := range src.Events() {
		started = true
		if !w.Emit(ev) {
			src.Close()
		}
	}
	res, err := src.Result()
	if started && err != nil {
		var se *llm.StreamError
		if !errors.As(err, &se) {
			err = &llm.StreamError{Partial: res, Err: err}
		}
	}
	return res, started, err
}
