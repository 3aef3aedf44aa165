package invalidate

// What the tests of package invalidate_test check errors against.
var (
	ErrInternal = errInternal
	ErrPlan     = errPlan
)

type TagError = tagError
