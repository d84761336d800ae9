"""A batch's chat thread: the parent, the progress message, the summary, and their feed.

    messages          Message, Upload, and the Poster and Feed a thread uses
    progress_message  the progress message edited in place, and the coalescing of edits
    summary_message   the end: the summary with its buttons, its uploads, the Show-logs answer
    batch_thread      BatchThread: follows one batch's events and drives a Poster
    thread_end        the end of a thread, each part posted exactly once across restarts
    end_watch         when a followed batch has ended (shared with the CLI and the console)
    thread_hub        ThreadHub: every thread of one bot, fed by one subscription or feed
    ports             the hub and the thread as each other sees them (no import between them)
    durable_feed      the Redis consumer group a distributed bot reads events through
"""
