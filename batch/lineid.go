package batch

import "context"

type lineKey struct{}

// LineOf returns the custom_id of the batch line whose Runner call ctx
// belongs to ("" outside a line), so that a Runner can name the line it
// serves (the gateway's request log does).
func LineOf(ctx context.Context) string {
	id, _ := ctx.Value(lineKey{}).(string)
	return id
}
