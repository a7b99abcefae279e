// Package plugin is the device's plugin host: it installs signed plugin bundles (verified
// against the trust store before anything is stored), keeps them in the `plugins` partition,
// loads them at boot in the background, runs each in its own sandboxed wazero instance
// with a memory cap, a stack budget and a time limit on every phase, restarts failing plugins with backoff and
// disables them after repeated failures, implements the host side of the ABI (package abi,
// abi/ABI.md) against the device's capabilities through the interfaces in deps.go, and
// serves the REST API under /api/v1/plugins. devctl's `plugin` commands are its client.
//
// REST (all protected; bodies JSON, errors the spec's {error} body):
//
//	GET    /plugins                     {plugins: [Status...]}
//	POST   /plugins                     install {url} or {upload}, optional {grant: [cap...]}
//	GET    /plugins/<id>                Status
//	POST   /plugins/<id>/start|stop     Status after the supervisor reacted
//	DELETE /plugins/<id>[?purge=true]   also {purge: true}; purge erases its configuration
//	GET    /plugins/keys                {keys: [Key...]}       (the trust store)
//	POST   /plugins/keys                {pem}                  201 added, 200 already trusted
//	GET    /plugins/keys/<kid>, DELETE /plugins/keys/<kid>
//	GET    /plugins/uploads             uploads in progress
//	POST   /plugins/uploads             {size} opens a chunked upload; {url} has the device
//	                                    download and verify the bundle (201 with what it asks)
//	PUT    /plugins/uploads/<uid>       {offset, data: base64} one chunk
//	GET    /plugins/uploads/<uid>       progress, to resume
//	POST   /plugins/uploads/<uid>       verify a complete upload and show what it asks for
//	DELETE /plugins/uploads/<uid>       abort
//
// Choices where the spec is silent:
//   - httprouter v1.3 cannot hold /plugins/keys beside /plugins/:id, so the :id routes
//     answer both and dispatch on the segment; `keys`, `uploads` (and `test`) are reserved
//     plugin ids (abi.ReservedIDs).
//   - Installing: the body names exactly one of url (http or https, at most 16 MiB, 20 s) and
//     upload. grant absent grants every capability the manifest asks for; present, it must be
//     a subset (400 validation, path "grant"). The answer (201 new, 200 replaced) lists what
//     was asked and granted. A refused bundle (unsigned, unknown key, bad signature, malformed,
//     another ABI) is 400 validation with the reason in the message and nothing is stored; a
//     bundle over the cap is 413. Installing an installed id replaces it: the old instance is
//     stopped first, its configuration and its namespace registration are kept. A route
//     another installed plugin serves (/prov, /ble/status) is 409 conflict.
//   - Uploads respect the 16 KiB request limit: a chunk carries at most MaxChunk (12000)
//     bytes, sent in order (a chunk at another offset is 409 conflict; GET tells where to
//     resume). At most 2 uploads are open; one idle for 10 minutes is discarded. An upload
//     lives in the partition's .uploads (emptied at boot) and is discarded once installed or
//     refused. Committing is optional: POST /plugins {upload} verifies too.
//   - Dormancy (ABI 1.4, dormant.go): a plugin whose work is off calls dormant with the
//     conditions that wake it (abi.Wake). Once the instance is idle (nothing queued, no
//     deferred PUT, no request in the last minute) the host stops it in order, releases its compiled module and frees the
//     heap; the state is dormant (GET /plugins: memory 0 and wake, the conditions). The
//     namespace stays registered, the routes stay routed and retained events stay. A request
//     to a route waits (pending) for the instance it wakes; a config write, a press or the
//     station losing its networks wakes it when its conditions say so; an operator's start
//     wakes it too. The record keeps the conditions and the descriptor: a boot registers the
//     namespace from it and does not start the plugin while no condition holds. A request
//     whose condition holds already is refused (ErrState), so a plugin cannot loop between
//     closing and starting.
//   - States: loading → running (or dormant); a failure → failed, restarted after 1 s, 2 s, 4 s ... at most
//     60 s; 5 failures in a row → disabled, kept across reboots with the reason, until an
//     operator starts it (which resets the count). Running 60 s resets the count. Failures
//     no restart can cure (bundle unreadable or no longer trusted, a module that does not
//     compile or link, a route the server refuses) disable at once. Stop is kept across
//     reboots. Trusting changes only at a load: a plugin whose key was removed runs on until
//     its next start, then is disabled.
//   - Health: one shared condition, `plugins` (the table has 12 slots): warn while a plugin
//     is failed and waiting for its restart or loading again after failures, alarm while one is disabled by failures, normal
//     otherwise; the message names each one with its last error. It never carries the reboot
//     flag. Conditions plugins report themselves are `<id>.<name>` (2 names per plugin).
//   - SSE: `plugins` carries the GET /plugins document at every change of state, wanted state,
//     installation or removal (not at every call counted). Snapshot is the on-connect callback
//     for the hub: that document plus every event a plugin published with retain.
//   - Status: memory is the bytes of the instance's linear memory; calls counts export
//     calls; errors counts failures, malformed host calls and dev_event answering non-zero;
//     denied counts permission refusals; dropped counts events lost to a full queue (4 MiB
//     per plugin). last_error stays after a recovery.
//   - Sandbox: each compiled module has its own wazero runtime (extism's CompiledPlugin); an instance is capped at
//     MemoryPages (default 512 pages, 32 MiB) for its linear memory and its Wasm stack
//     together: StackBytes (default 1 MiB) of the cap are the stack budget, the rest is the
//     linear memory's limit (the reservation is address space, only touched pages cost RAM).
//     wazero keeps a Wasm stack on the Go heap and grows it to about 50 MB with no setting to
//     lower that; package stackguard rewrites the module so that recursion past the budget
//     traps (last_error "stack budget exceeded"). Every phase is under a limit: compiling is
//     bounded by the bundle cap (wazero's compiler takes no cancellation), the start (the
//     module's start function runs while it is instantiated) and every call, _initialize and
//     dev_init included, by CallTimeout (default 1 s) of running. The limit is enforced through fuel
//     (package fuel): the module is rewritten to count loop iterations, function entries and
//     KiB moved by bulk memory instructions in a global and to call the host's
//     devhost.refuel every 20,000 of them, which traps once
//     the call's time is up or it was stopped (and holds a call back, below). wazero's own termination checks
//     (WithCloseOnContextDone) are off: they leave the compiled code for Go at every loop
//     header, and Go-built plugins have a loop in every function, which made the guarded
//     path about three times slower than the same code without any check; with fuel it runs
//     within 5 to 20 % of it (BenchmarkPublish, batch100 against batch100-nolimit). A start that runs out of time is a failure like any
//     other: restarted with backoff, disabled after MaxFailures, kept disabled across
//     reboots. A stop or a removal cancels whatever phase is in progress at once. WASI gives
//     no filesystem, no stdout or stderr, crypto random bytes, a monotonic clock at the real
//     pace, the device's wall clock, and a sleep that returns at once, so a plugin cannot
//     block: one that tries to sleep spins into its time limit.
//   - Runtime: extism go-sdk, through its public API. extism.NewCompiledPlugin compiles the
//     (stack-guarded) module with WASI and the ABI's host functions (NewHostFunctionWithStack,
//     namespace "extism:host/user") in a runtime of its own, configured by a
//     wazero.RuntimeConfig (the memory cap, the compilation cache);
//     CompiledPlugin.Instance starts each instance under its time limit with the
//     clocks and random source above; Plugin.CallWithContext makes the first call.
//     extism names the guest runtime's _initialize and runs it in the first call; the host
//     makes that first call to stackguard's getter, so a failure there is reported as
//     _initialize's and extism does not run it again before the getter is asked, after a
//     failed export, whether the stack budget stopped it. Four parts extism has no API for
//     go to wazero directly, each through wazero's public API alone:
//     (1) checking a module before it is instantiated: extism keeps the compiled module to
//     itself and exposes an instance's exports by name only, so the module is first compiled
//     by a wazero runtime of the engine's with extism's configuration and the same
//     compilation cache (wazero keeps one compiled copy per cache, so extism's compilation
//     that follows finds it done) and its imports and exports are checked against
//     abi.Signatures and WASI by type, from wazero's declared definitions, never from error
//     text; a mismatch disables the plugin at once. This also
//     keeps extism's own host functions ("extism:host/env": its HTTP client, variables,
//     configuration) out of a plugin's reach.
//     (2) the plugin's linear memory (section 5 of the ABI): Plugin.Memory is extism's
//     kernel's memory, not the plugin's, and the plugin's own module is private. The
//     instance's memories are allocated through wazero's experimental.WithMemoryAllocator
//     (which also reserves the whole cap up front so growing never moves the memory); the
//     one that is not the kernel's is the plugin's.
//     (3) memory use: the same allocator reports the plugin's memory, the kernel's left out.
//     (4) calling exports after the first call: Plugin.CallWithContext sets an (empty) input
//     and reads the error and output through extism's kernel, six kernel calls, and looks up
//     seven exported functions, each allocating a fresh call stack (about 84 KB and 30 µs a
//     call on a loaded 2-core machine, two thirds of a dev_event carrying 100 values). The
//     ABI uses none of that. The plugin's module is private to extism, so every compilation
//     carries a wazero function listener (experimental.WithFunctionListenerFactory) on
//     stackguard's getter alone, the function of the first call: it hands the module the
//     getter runs in to the instance, whose later calls go to that module's exports through
//     wazero, with extism's Plugin in the context as its host function wrapper expects.
//     Every instance still carries the kernel's instance and memory beside the plugin's.
//   - Calls into one plugin are serialised on its worker goroutine; on Linux that goroutine
//     keeps an OS thread of its own at nice 10 (the thread ends with it), and a call running
//     past 5 ms (noticed at a refuel) lends the process one more GOMAXPROCS slot until it
//     returns (procs.go), so a plugin spinning into its time limit yields the CPU to the
//     host's own threads. Events are
//     queued in its inbox and delivered in batches of at most 1 MiB, consecutive deltas
//     merged; CAN frames wait up to 50 ms (CANGather) or 256 frames for company, unless
//     another event comes, so a busy bus costs a call per 50 ms rather than per frame. A stop
//     between calls is orderly (the stop record, host functions working); a stop during a call
//     cuts it off at once and every later host call answers plugin stopped.
//   - Plugin code has a lower priority than the device's API (throttle.go): a call that has
//     run 2 ms gives way while a request of the host's own API is in flight (package
//     foreground counts them; a plugin's own routes and the event streams are not counted):
//     after every 1 ms it runs, it parks 15 ms in refuel, so it takes at most a sixteenth of
//     the time while the API is busy and runs unthrottled while the API is idle. The call
//     limit counts the time a call ran, not the time it was held back: a spinning plugin is
//     still stopped after CallTimeout of its own running, within 16 times CallTimeout of wall
//     time when the API is busy all along (the meter ends it there as a backstop). A
//     stop ends a parked call at once. The module's start function, which runs before there
//     is a call to meter, keeps a limit in wall time and is not held back.
//   - Plugin routes exist while the plugin runs (404 otherwise); a request waits for the
//     plugin's answer at most 30 s; unanswered in its call it is 500, while the plugin stops
//     503. A deferred inbound PUT fails (502) after 30 s; unanswered ones fail at once.
//   - A restarted instance registering the namespace it registered before changes nothing
//     (same ETag); a different descriptor replaces it, and a refused replacement leaves the
//     previous one registered. Remove unregisters; purge erases the stored values.
//   - Compiled code is cached in the partition's .cache/fuel (wazero's compilation cache), so
//     a reboot loads instead of compiling. Code compiled with wazero's termination checks,
//     kept in .cache itself by earlier versions, is never loaded again and is removed (wazero
//     never evicts). Beside it, linked-<fingerprint>/<sha256> records that a module passed
//     the link check, so a start after a reboot compiles (loads) it once instead of twice;
//     the fingerprint covers the ABI table and the wazero version. Also beside it,
//     instrumented-<build id digest>/ keeps each module as fuel and stackguard rewrote it
//     (instrumented.go), so a start after a reboot reads the rewrite instead of redoing it;
//     another executable reads and writes another directory, and removes the earlier one.
//     Plugins built from the same module share one compiled copy.
//   - At boot the installed plugins are listed from their bundles' heads (abi.ReadHead); a
//     bundle is read whole when its plugin starts. GET /plugins says bundled_pending while
//     the device offers the plugins its firmware carries (OfferingBundled, package bundled).
//   - The partition is separate from `nvs`: a factory reset erases plugin configuration, not
//     installed bundles or publisher keys, unless the device erases the partition too.
//
// Where things are:
//   - manager.go: Options, the Manager and its tables (plugins by id, PUT pattern claims), New,
//     Run; plugin.go: one installed plugin, its wanted state (Start, Stop) and what it set up
//     this boot; supervise.go: its life (load, run, fail, back off, disable); install.go:
//     verifying, installing and removing bundles, and the REST error mapping; status.go: the
//     Status document, the `plugins` event, the SSE snapshot and the health condition.
//   - engine.go: extism and wazero (compile, check, instantiate); mem*.go: linear memory;
//     procs.go and prio_*.go: CPU use of plugin calls; stackguard/: the stack budget.
//   - session.go: one running instance and its open requests; hostfn.go: the ABI's host
//     functions; inbox.go: events waiting for the next batch; deps.go: the device interfaces;
//     skresult.go: ABI PUT results to the host's (package sk); mdns.go: mdns_service;
//     net.go: the net.client sockets (net_open, net_send, net_close) and their goroutines;
//     dormant.go: dormancy (the dormant host function, doze, pending events, the record).
//   - http.go: the REST API; upload.go: chunked uploads and downloads; partition.go: the
//     `plugins` partition on disk; configadapter.go: the f_<id> namespaces; trust/: keys.
//
// Lock order (a lock may be taken while holding those before it, never the reverse):
//
//	Manager.installMu → Manager.healthMu → Manager.mu or plugin.mu → inbox.mu
//
// Manager.mu and a plugin's mu are never held together: the manager copies its plugin list
// under its own lock, releases it, then takes each plugin's. A plugin's mu is released before
// it calls the manager (setState → changed) or a session (abort). The session's callMu and
// putMu, the engine's (its compiling slot → mu), the uploads', the memory allocator's and
// procLender's locks are held only around their own fields and take no other lock. The
// session's socket table lock may be held while taking a socket's mu (endNet), never the
// reverse; a socket's goroutines push to the inbox holding neither.
package plugin
