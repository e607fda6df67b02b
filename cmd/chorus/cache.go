package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/cache/pgcache"
	"github.com/chorusrt/chorus/cache/sqlitecache"
	"github.com/chorusrt/chorus/runtime"
)

// cacheConfig is chorus.yaml's cache: the runtime's response cache, used
// by serve, batch and chat:
//
//	cache:
//	  store: sqlite            # memory | sqlite | postgres
//	  path: chorus-cache.db    # sqlite
//	  dsn: postgres://...      # postgres
//	  ttl: 24h                 # 0 or absent: until evicted
//	  max_entries: 100000      # size cap (0: none)
//	  max_bytes: 1000000000
//	  mode: on                 # the default mode: on | read_only | write_only | off
//	  share_across_keys: false # serve: one namespace for every gateway key
type cacheConfig struct {
	set       bool
	store     string
	path, dsn string
	ttl       time.Duration
	lim       cache.Limits
	mode      cache.Mode
	share     bool
}

func (p *configParser) cache(n *yaml.Node, cfg *fileConfig) error {
	c := &cfg.cache
	c.set = true
	c.store = "memory"
	var storeNode, pathNode, dsnNode *yaml.Node
	err := p.mapping(n, "cache", func(key string, k, v *yaml.Node) error {
		what := "cache." + key
		var err error
		switch key {
		case "store":
			storeNode = v
			c.store, err = p.str(v, what)
		case "path":
			pathNode = v
			c.path, err = p.str(v, what)
		case "dsn":
			dsnNode = v
			c.dsn, err = p.str(v, what)
		case "ttl":
			d, perr := time.ParseDuration(strings.TrimSpace(v.Value))
			if v.Kind != yaml.ScalarNode || perr != nil || d < 0 {
				return p.errf(v, "%s: want a non-negative duration like 24h, got %q", what, v.Value)
			}
			c.ttl = d
		case "max_entries":
			c.lim.MaxEntries, err = p.nonNegInt(v, what)
		case "max_bytes":
			b, perr := strconv.ParseInt(strings.TrimSpace(v.Value), 10, 64)
			if v.Kind != yaml.ScalarNode || perr != nil || b < 0 {
				return p.errf(v, "%s: want a non-negative integer, got %q", what, v.Value)
			}
			c.lim.MaxBytes = b
		case "mode":
			c.mode, err = cache.ParseMode(what, strings.TrimSpace(v.Value))
			if err != nil {
				err = p.errf(v, "%v", err)
			}
		case "share_across_keys":
			c.share, err = p.boolean(v, what)
		default:
			err = p.errf(k, "%s: unknown key (known: store, path, dsn, ttl, max_entries, max_bytes, mode, share_across_keys)", what)
		}
		return err
	})
	if err != nil {
		return err
	}
	switch c.store {
	case "memory":
	case "sqlite":
		if c.path == "" {
			return p.errf(n, "cache.path: store sqlite needs the database file's path")
		}
	case "postgres":
		if c.dsn == "" {
			return p.errf(n, "cache.dsn: store postgres needs a DSN")
		}
	default:
		return p.errf(storeNode, "cache.store: unknown store %q (known: memory, sqlite, postgres)", c.store)
	}
	if pathNode != nil && c.store != "sqlite" {
		return p.errf(pathNode, "cache.path: only store sqlite has a path")
	}
	if dsnNode != nil && c.store != "postgres" {
		return p.errf(dsnNode, "cache.dsn: only store postgres has a DSN")
	}
	return nil
}

// openCache opens the configured cache; nil when there is none.
func openCache(cfg *fileConfig) (*cache.Cache, error) {
	c := cfg.cache
	if !c.set {
		return nil, nil
	}
	var s cache.Store
	var err error
	switch c.store {
	case "memory":
		s, err = cache.NewMemory(c.lim)
	case "sqlite":
		s, err = sqlitecache.Open(c.path, c.lim)
	case "postgres":
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		s, err = pgcache.Open(ctx, c.dsn, c.lim)
		cancel()
	}
	if err != nil {
		return nil, &configError{path: cfg.path, msg: fmt.Sprintf("cache: %v", err)}
	}
	cc, err := cache.New(s, cache.Options{TTL: c.ttl, Mode: c.mode})
	if err != nil {
		s.Close()
		return nil, &configError{path: cfg.path, msg: fmt.Sprintf("cache: %v", err)}
	}
	return cc, nil
}

// cacheOption is the runtime option of the configured cache.
func cacheOption(c *cache.Cache) runtime.Option {
	return runtime.WithCache(c, runtime.CacheOptions{})
}
