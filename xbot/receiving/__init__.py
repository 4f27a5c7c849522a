"""Telegram updates coming in: the durable poller (`polling`), the webhook listener
(`webhook`) and how an update came in (`intake`: may Telegram send it again?).

Each confirms an update to Telegram only after its handlers stored the work.
"""
