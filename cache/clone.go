package cache

import (
	"reflect"

	"github.com/chorusrt/chorus/llm"
)

// Clone returns a deep copy of res, so that a caller may change its
// answer without changing another's. It copies by reflection: a field
// added to llm.ChatResult later is copied too.
func Clone(res *llm.ChatResult) *llm.ChatResult {
	if res == nil {
		return nil
	}
	out := new(llm.ChatResult)
	deepCopy(reflect.ValueOf(out).Elem(), reflect.ValueOf(res).Elem())
	return out
}

// deepCopy sets dst (settable) to a copy of src sharing no slice, map or
// pointer with it.
func deepCopy(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		deepCopy(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		if k := src.Type().Elem().Kind(); k <= reflect.Complex128 || k == reflect.String {
			reflect.Copy(s, src) // no references inside
		} else {
			for i := range src.Len() {
				deepCopy(s.Index(i), src.Index(i))
			}
		}
		dst.Set(s)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		it := src.MapRange()
		for it.Next() {
			v := reflect.New(src.Type().Elem()).Elem()
			deepCopy(v, it.Value())
			m.SetMapIndex(it.Key(), v)
		}
		dst.Set(m)
	case reflect.Struct:
		for i := range src.NumField() {
			if dst.Field(i).CanSet() {
				deepCopy(dst.Field(i), src.Field(i))
			}
		}
	case reflect.Interface:
		if src.IsNil() {
			return
		}
		v := reflect.New(src.Elem().Type()).Elem()
		deepCopy(v, src.Elem())
		dst.Set(v)
	default:
		dst.Set(src)
	}
}
