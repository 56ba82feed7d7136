package rmqamqp

import (
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// zombieAfter is how long a channel may stay closed while the connection
// is open and no recovery of it was announced before it is given up.
const zombieAfter = 5 * time.Second

// session is the confirm-mode channel the forwarder publishes on.
//
// amqp091's recovery reopens a lost channel, puts it back into confirm mode
// and restarts its delivery tags at 1 (nacking what awaited a confirm). A
// publish that went out between the reopen and confirm.select would never
// be confirmed by the broker, yet take tag 1 on our side: the next
// message's confirm would resolve it, and every later confirm would pair
// with the wrong message. So the session counts, from the notifications
// amqp091 sends, the losses of the channel (close notifications, sent
// before any reopen) and its completed reopenings (a Reconnecting then an
// Open state change, the Open sent after confirm.select). It publishes
// only while every loss was followed by a completed reopening, and checks
// after each publish that no loss came in between; a publish that raced a
// loss ruins the channel's tag sequence, and the channel is retired.
type session struct {
	ch      *amqp.Channel
	closes  chan *amqp.Error
	states  chan *amqp.StateChanged
	returns chan amqp.Return

	mu          sync.Mutex
	losses      int
	reopens     int
	reopening   bool // a Reconnecting came after the last counted event
	gone        bool // closed for good, or retired
	closeErr    *amqp.Error
	closedSince time.Time // first seen closed while it should be usable
	// returns of publishes drained from the channel, not yet claimed
	returned map[returnKey]amqp.Return
}

// returnKey identifies a publish in flight: an RMQ delivery (id, topic and
// attempt) is forwarded at most once at a time.
type returnKey struct{ id, topic, attempt string }

func keyOf(messageID string, h amqp.Table) returnKey {
	s := func(k string) string { v, _ := h[k].(string); return v }
	return returnKey{id: messageID, topic: s(HeaderTopic), attempt: s(HeaderAttempt)}
}

// openSession opens a channel with its listeners registered before it is
// put into confirm mode and before anything is published.
//
// returns has room for one return per window slot: RabbitMQ sends a
// mandatory publish's basic.return before its basic.ack, amqp091 hands it
// over before it resolves the publish's DeferredConfirmation, and the slot
// is given back only after the return was claimed; amqp091 would drop a
// return it cannot hand over within 5 s.
func openSession(conn *amqp.Connection, window int) (*session, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	s := &session{
		ch:       ch,
		closes:   ch.NotifyClose(make(chan *amqp.Error, 64)),
		states:   make(chan *amqp.StateChanged, 64),
		returns:  ch.NotifyReturn(make(chan amqp.Return, window+1)),
		returned: map[returnKey]amqp.Return{},
	}
	ch.NotifyStateChange(s.states)
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, err
	}
	return s, nil
}

// poll takes in amqp091's notifications and reports whether the channel
// may be published on now (and how many losses it has seen, for the check
// after a publish), and whether it is gone for good.
func (s *session) poll(connOpen bool) (usable bool, losses int, gone bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drainLocked()
	usable = !s.gone && s.reopens >= s.losses && !s.reopening
	// A channel that should be usable but stays closed while the
	// connection is open was closed without a notification we act on;
	// nothing will reopen it.
	if usable && s.ch.IsClosed() && connOpen {
		if s.closedSince.IsZero() {
			s.closedSince = time.Now()
		} else if time.Since(s.closedSince) > zombieAfter {
			s.gone = true
			usable = false
		}
	} else {
		s.closedSince = time.Time{}
	}
	return usable, s.losses, s.gone
}

// drainLocked counts the losses and reopenings amqp091 notified.
func (s *session) drainLocked() {
	for more := true; more && !s.gone; {
		select {
		case err, ok := <-s.closes:
			if !ok {
				s.gone = true
				break
			}
			s.losses++
			s.reopening = false
			if err != nil {
				s.closeErr = err
			}
		default:
			more = false
		}
	}
	for more := true; more && !s.gone; {
		select {
		case ev, ok := <-s.states:
			switch {
			case !ok || ev.To == amqp.StateClosed || ev.To == amqp.StateClosing:
				s.gone = true
			case ev.To == amqp.StateReconnecting:
				s.reopening = true
			case ev.To == amqp.StateOpen && s.reopening:
				s.reopening = false
				s.reopens++
			}
		default:
			more = false
		}
	}
}

// retire stops all publishing on the session.
func (s *session) retire() {
	s.mu.Lock()
	s.gone = true
	s.mu.Unlock()
}

// why is the broker's reason of the last loss, if any.
func (s *session) why() *amqp.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drainLocked()
	return s.closeErr
}

// claimReturn moves what the broker returned into the session's map and
// takes the return of the publish k, if there is one.
func (s *session) claimReturn(k returnKey) (amqp.Return, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for more := true; more; {
		select {
		case r, ok := <-s.returns:
			if !ok {
				more = false
				break
			}
			s.returned[keyOf(r.MessageId, r.Headers)] = r
		default:
			more = false
		}
	}
	r, ok := s.returned[k]
	delete(s.returned, k)
	return r, ok
}
