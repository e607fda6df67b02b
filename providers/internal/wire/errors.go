package wire

import "errors"

// ErrAborted is returned by a decoder whose Emit reported that the caller left.
var ErrAborted = errors.New("wire: consumer gone")
