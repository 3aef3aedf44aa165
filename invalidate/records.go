package invalidate

import (
	"fmt"
	"runtime"
	"sync"
)

// parallelDecodeMin is the batch size from which decoding is spread over the
// CPUs: below it, starting goroutines costs more than it saves.
const parallelDecodeMin = 256

// Records decodes a batch of inputs (SQS messages, SNS records, stream
// records) into Records, in input order, on every CPU when the batch is
// large. decode must be safe to call concurrently, as the decoders of
// package events are; should it panic, that input's record fails.
func Records[T any](inputs []T, decode func(*T) Record) []Record {
	records := make([]Record, len(inputs))
	parts := runtime.GOMAXPROCS(0)
	if len(inputs) < parallelDecodeMin || parts == 1 {
		for i := range inputs {
			records[i] = safely(&inputs[i], decode)
		}
		return records
	}
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() {
			for i := p * len(inputs) / parts; i < (p+1)*len(inputs)/parts; i++ {
				records[i] = safely(&inputs[i], decode)
			}
		})
	}
	wg.Wait()
	return records
}

func safely[T any](input *T, decode func(*T) Record) (r Record) {
	defer func() {
		if p := recover(); p != nil {
			r = Record{ID: r.ID, Err: fmt.Errorf("internal error decoding a record: %v", p)}
		}
	}()
	return decode(input)
}
