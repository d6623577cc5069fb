"""The run and device state machine: every transition of a run or a device the fleet's Redis
holds, each one Lua script in `lua/` (loaded by `scripts`, with the fragments of `lua/lib/`
and the status names of `workers.core.model.RunStatus`), called from one of four stores:

    queue.RunQueue        the scheduler's side: submit, reserve, unreserve, release a stray
                          reservation, cancel, expire an unplaceable run
    runs.RunStore         the worker's side: claim, step, finish, hand back
    questions.QuestionStore  park a run for a person, answer (requeue or end), expire, cancel
    devices.DeviceRegistry   register, renew, deregister, recover (lift a quarantine)

A run's states (`reserved` reads `queued` from outside: a queued run that holds a device; see
`lib/places.lua`) and the events that move it, with the script of each:

    state \\ event    submit   reserve  claim    finish   hand_back  cancel      park     answer   expire
    (new)            pending                                                                     .
                     |reserved
    pending          .        reserved .        .        .          cancelled   .        .        unplaceable
    reserved         .        .        running  .        pending    cancelled   .        .        .
    running          .        .        running* terminal pending    (requested) awaiting .        .
    awaiting_answer  .        .        .        .        .          cancelled   .        pending  escalated
                                                                                          |done
                                                                                          |blocked
    terminal         .        .        .        .        .          (reported)  .        .        .

    * a redelivered message claims again: attempt + 1, past the cap it is finished errored.
    unreserve (the message could not be sent), release_stray (no registered device holds the
    reservation) and deregister (the device leaves) also take reserved -> pending.

Where each state lives, which `tests/unit/test_state_machine.py` checks after every step of
random interleavings:

    pending          status queued, no device, in `pending`, not in `reserved`
    reserved         status queued, `device` set and that device's `run` is this run, in
                     `reserved`, not in `pending`
    running          status running, a claim token, in `running`; its device's `run` is it
    awaiting_answer  its question and an entry in `questions`; no device holds it
    terminal         in no index; no device holds it

A device is registered (in `devices`, with a lease while its worker lives), holds at most one
run (`run`), and is never given a run while quarantined or without a live lease.
"""
