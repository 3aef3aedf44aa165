package invalidate

import (
	"context"
	"strconv"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/tagset"
)

// Tag is what a tag holds, read without changing it.
type Tag struct {
	// Epoch is the tag clock's reading at the tag's last invalidation; 0
	// when none is known.
	Epoch int64
	// Members are the entries registered in it, up to the number asked
	// for; More says there are others.
	Members []Member
	More    bool
}

// ReadTag reads the tag at key and up to limit of its members, a page at a
// time with HSCAN, beside HGET of its epoch: a reader needs only those two
// on the tags' keys. A missing tag holds nothing.
func ReadTag(ctx context.Context, client ValkeyClient, key string, limit int) (Tag, error) {
	var t Tag
	epoch, err := client.DoMulti(ctx, client.B().Hget().Key(key).Field(tagset.Epoch).Build())[0].ToString()
	if err != nil && !valkey.IsValkeyNil(err) {
		return t, err
	}
	t.Epoch, _ = strconv.ParseInt(epoch, 10, 64)
	for cursor := uint64(0); ; {
		page, next, err := members(client.DoMulti(ctx, client.B().Hscan().Key(key).Cursor(cursor).Count(int64(min(max(limit, 1), 1000))).Build())[0])
		if err != nil {
			return t, err
		}
		for _, m := range page {
			if len(t.Members) == limit {
				t.More = true
				return t, nil
			}
			t.Members = append(t.Members, m)
		}
		if next == 0 {
			return t, nil
		}
		cursor = next
	}
}
