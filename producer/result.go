package producer

// SendResult says what a send did to the slot.
type SendResult int

// What send.lua reports.
const (
	// SendDuplicate: go-redis ran the script a second time for one call;
	// the second run changed nothing.
	SendDuplicate SendResult = 0
	// SendStored: a new message.
	SendStored SendResult = 1
	// SendMerged: merged into a waiting range-merge message (due time kept).
	SendMerged SendResult = 2
	// SendReplaced: replaced a waiting message's priority or due time.
	SendReplaced SendResult = 3
	// SendRestored: stored again while the same id is being handled; it is
	// delivered after that delivery ends.
	SendRestored SendResult = 4
)

func (r SendResult) String() string {
	switch r {
	case SendDuplicate:
		return "duplicate"
	case SendStored:
		return "stored"
	case SendMerged:
		return "merged"
	case SendReplaced:
		return "replaced"
	case SendRestored:
		return "restored"
	}
	return "unknown"
}
