package sk

import "testing"

// OK is the spec's success: a COMPLETED answer with a 2xx status; PENDING, FAILED, TIMEOUT and
// any other status are not.
func TestPutAnswerOK(t *testing.T) {
	for _, tc := range []struct {
		a    PutAnswer
		want bool
	}{
		{PutAnswer{State: "COMPLETED", StatusCode: 200}, true},
		{PutAnswer{State: "COMPLETED", StatusCode: 299}, true},
		{PutAnswer{State: "COMPLETED", StatusCode: 400}, false},
		{PutAnswer{State: "COMPLETED", StatusCode: 502}, false},
		{PutAnswer{State: "COMPLETED"}, false},
		{PutAnswer{State: "PENDING", StatusCode: 202}, false},
		{PutAnswer{State: "FAILED", StatusCode: 200}, false},
		{PutAnswer{State: "TIMEOUT"}, false},
	} {
		if got := tc.a.OK(); got != tc.want {
			t.Errorf("%+v: OK %v, want %v", tc.a, got, tc.want)
		}
	}
}
