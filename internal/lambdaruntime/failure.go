package lambdaruntime

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
)

// stderr is where panics' tracebacks go; tests take them.
var stderr io.Writer = os.Stderr

// failure is an invoke's error as the runtime API takes it, and as
// aws-lambda-go sent it.
type failure struct {
	Message    string  `json:"errorMessage"`
	Type       string  `json:"errorType"`
	StackTrace []frame `json:"stackTrace,omitempty"`
	panicked   bool
}

type frame struct {
	Path  string `json:"path"`
	Line  int    `json:"line"`
	Label string `json:"label"`
}

func errorFailure(err error) *failure {
	return &failure{Message: err.Error(), Type: typeName(err)}
}

// typeName is v's type name without its package, a pointer's element's for
// a pointer — aws-lambda-go's errorType, which callers may match on. Only
// failures pay for the reflection.
func typeName(v any) string {
	t := reflect.TypeOf(v)
	if t == nil {
		return ""
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// panicFailure reports v, the value a handler panicked with; it must be
// called by the deferred function that recovered it, while the panicking
// frames are still on the stack. The Go traceback goes to stderr too, as
// an unrecovered panic would have written it: the process is about to exit.
func panicFailure(v any) *failure {
	fmt.Fprintf(stderr, "panic: %v\n\n%s", v, debug.Stack())
	var pcs [32]uintptr // aws-lambda-go's depth
	// Skip runtime.Callers, panicFailure, the deferred function and
	// runtime.gopanic: the first frame is where the handler panicked.
	n := runtime.Callers(4, pcs[:])
	stack := make([]frame, 0, n)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		stack = append(stack, newFrame(f))
		if !more {
			break
		}
	}
	return &failure{Message: fmt.Sprintf("%v", v), Type: typeName(v), StackTrace: stack, panicked: true}
}

// newFrame names a frame as aws-lambda-go did: the label is the function
// without its package path, the path is the file's last elements, as many
// as the package path has plus the file's own — the import path and the
// file, when the source sits under a directory that ends with it (GOPATH,
// -trimpath); the whole path when it has fewer.
func newFrame(f runtime.Frame) frame {
	label, path := f.Function, f.File
	keep := strings.Count(label, "/") + 2
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			if keep--; keep == 0 {
				path = path[i+1:]
				break
			}
		}
	}
	label = label[strings.LastIndexByte(label, '/')+1:]
	label = label[strings.IndexByte(label, '.')+1:]
	return frame{Path: path, Line: f.Line, Label: label}
}

// body is the failure's JSON. It cannot fail: strings and ints only.
func (f *failure) body() []byte {
	b, _ := json.Marshal(f)
	return b
}
