package invalidate

import (
	"strconv"
	"time"

	"github.com/invalidator-go/invalidator/internal/tagset"
)

// The ECPU model: what ElastiCache Serverless meters for each command the
// Invalidator sends. AWS describes an ECPU as the vCPU time and the data
// transferred of a request — a simple command moving up to 1 KB is 1 ECPU,
// one moving 3.2 KB is 3.2 — and publishes no formula. The model counts
// each command's bytes as sent and as answered, in RESP, at 1 ECPU per
// 1,024, and at least 1 ECPU a command. It assumes that the tag scripts'
// vCPU time stays under their bytes' worth; make bench measures both
// (bench/README.md, "What the worker costs the cache").

// kb is the bytes of one ECPU.
const kb = 1024

// cost is what commands cost: their ECPUs, and the bytes they moved.
type cost struct {
	ecpus float64
	bytes int
}

func (c cost) plus(o cost) cost { return cost{c.ecpus + o.ecpus, c.bytes + o.bytes} }

// command is the cost of one command of bytes, request and reply.
func command(bytes int) cost { return cost{max(1, float64(bytes)/kb), bytes} }

// bulk is the bytes of one RESP bulk string of n bytes: $n\r\n...\r\n.
func bulk(n int) int { return len(strconv.Itoa(n)) + n + 5 }

// array is the bytes of a RESP array's header of n elements: *n\r\n.
func array(n int) int { return len(strconv.Itoa(n)) + 3 }

// unlinkCost is the cost of UNLINK key, answered :0 or :1.
func unlinkCost(key string) cost {
	return command(array(2) + bulk(len("UNLINK")) + bulk(len(key)) + 4)
}

// scriptBytes is the bytes of EVALSHA <sha1> 1 key, before its arguments.
func scriptBytes(key string, args int) int {
	return array(4+args) + bulk(len("EVALSHA")) + bulk(40) + bulk(1) + bulk(len(key))
}

// tickCost is the cost of reading the tag clock: a script of no
// argument, answered a number.
func tickCost(clock string) cost { return command(scriptBytes(clock, 0) + 24) }

// pageCost is the cost of a page of the tag at key: the script, its
// three numbers as asked, and the page as answered — the next cursor, and
// each member's key and registration.
func pageCost(key string, reading int64, cursor uint64, count int, members []Member, next uint64) cost {
	n := scriptBytes(key, 3) + bulk(len(strconv.FormatInt(reading, 10))) + bulk(len(strconv.FormatUint(cursor, 10))) + bulk(len(strconv.Itoa(count)))
	n += array(2) + bulk(len(strconv.FormatUint(next, 10))) + array(2*len(members))
	for _, m := range members {
		n += bulk(len(m.Key)) + bulk(len(m.Registration))
	}
	return command(n)
}

// pageGuess is what a page of the tag at key is asked for before it is
// read, when no page of it was: count members, each named as long as the
// tag's key, so that a fleet that starts many tags at once does not send
// their pages before its budget grants them.
func pageGuess(key string, reading int64, count int) float64 {
	member := bulk(len(key)) + bulk(len(tagset.Registration(reading, time.Now())))
	return command(pageCost(key, reading, 0, count, nil, 0).bytes + count*member).ecpus
}

// forgetCost is the cost of forgetting members of the tag at key: a
// script per forgetChunk of them, each sent with its registration,
// answered a number.
func forgetCost(key string, members []Member) (c cost) {
	for lo := 0; lo < len(members); lo += forgetChunk {
		chunk := members[lo:min(lo+forgetChunk, len(members))]
		n := scriptBytes(key, 2*len(chunk)) + 8
		for _, m := range chunk {
			n += bulk(len(m.Key)) + bulk(len(m.Registration))
		}
		c = c.plus(command(n))
	}
	return c
}
