package cluster

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/chorusrt/chorus/session"
)

type sessionHost struct{}

func newSessionHost(n *Node, opt session.Options) (*sessionHost, error) { return &sessionHost{}, nil }
func (h *sessionHost) props() *actor.Props                                { return nil }
func (h *sessionHost) start()                                              {}
func (h *sessionHost) close(ctx context.Context)                           {}
func (h *sessionHost) shutdown()                                           {}
