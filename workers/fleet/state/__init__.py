"""The run and device state machine: every transition of a run or a device the fleet's Redis
holds, each one Lua script in `lua/` (loaded by `scripts`, with the fragments of `lua/lib/`
and the status names of `workers.core.model.RunStatus`), called from one of four stores:

    queue.RunQueue        the scheduler's side: submit, reserve, resend, unreserve, release a
                          stray reservation, release a run whose worker lost its lease,
                          cancel, expire an unplaceable run
    runs.RunStore         the worker's side: claim, step, finish, hand back
    questions.QuestionStore  park a run for a person, answer (requeue or end), expire, cancel
    devices.DeviceRegistry   register, renew, deregister, recover (lift a quarantine)

A run's states (`reserved` reads `queued` from outside: a queued run that holds a device; see
`lib/places.lua`) and the events that move it, with the script of each:

    event             from              to                                    script
    submit            (new)             pending, or reserved (a free device)  submit_one
    reserve           pending           reserved                              reserve
    unreserve         reserved          pending (its device is down)          unreserve
    resend            reserved          reserved (its message again)          resend
    release stray     reserved          pending (no device holds it)          release_stray
    deregister        reserved          pending (its device left)             deregister
    claim             reserved          running                               claim
                      running           running* (a redelivery)               claim
    step              running           running                               step
    finish            running           done | blocked | escalated |          finish
                                        max-steps | errored | cancelled
    hand back         running|reserved  pending                               hand_back
    lease lost        running           pending (its worker lost the lease)   release_lapsed
    park              running           awaiting_answer                       park
    answer            awaiting_answer   pending (a control) | done | blocked  answer (with
                                                                              its memory entry)
    expire question   awaiting_answer   escalated                             end_question
    cancel            pending|reserved  cancelled                             cancel
                      running           running, cancel requested (the worker ends it)
                      awaiting_answer   cancelled                             end_question
    expire            pending           unplaceable                           expire
    end overdue       running           errored (the scheduler, by claim)     finish

    * a redelivered message claims again: attempt + 1, past the cap it is finished errored.
    A finish that fails a run with `retries` left also submits its next attempt (a new run,
    pending, for the same device, in the same batch: `lib/retry.lua`). Every script that ends
    or parks a run appends an event for webhooks when someone listens (`lib/events.lua`).
    lease lost: the claim records its worker's lease token (`holder`); a running run whose
    device's lease that token no longer holds (lapsed, or another worker's) goes back to
    pending, its attempt counted, so any matching device takes it (the scheduler's sweep,
    every quarter lease); a message of it redelivered later is skipped by the claim.
    unreserve (its device is down), release_stray (no registered device holds the
    reservation) and deregister (the device leaves) also take reserved -> pending.

Where each state lives, which `tests/unit/test_state_machine.py` checks after every step of
random interleavings:

    pending          status queued, no device, in `pending`, not in `reserved`
    reserved         status queued, `device` set and that device's `run` is this run, in
                     `reserved`, not in `pending`
    running          status running, a claim token, in `running`; its device's `run` is it
    awaiting_answer  its question and an entry in `questions`; no device holds it
    terminal         in no index; no device holds it

Every reservation (submit onto a free device, reserve, resend) is followed by the run's message,
sent by the caller through Celery (`workers.fleet.delivery.send_run`); a refused one sends
nothing. The broker delivers it at most once; a reservation whose message never left or was
lost is sent again by the scheduler's orphan sweep (`resend`), and a running run's worker sends
it again when its pool child dies (docs/design.md, "One delivery protocol").

Keys are built in Python only: a script gets its keys as KEYS, and builds one from another
(a run's batch, the prefix's indexes) only through the prelude's `K`, generated from `Keys`
(`scripts.PRELUDE`).

A device is registered (in `devices`, with a lease while its worker lives), holds at most one
run (`run`), and is never given a run while quarantined or without a live lease.
"""
