"""The conversation on a pair or a caption: post a comment (with @mentions), the rejection that opens the thread, the
author's "fixed, please look again" that returns the item to review, and who has comments to read.

An item is a Pair or a Caption. Who may read and write its thread: its author, reviewers and coordinators, and anyone
mentioned in it. Each comment leaves a notice for the people it concerns (the item's author, everyone who wrote in
the thread, the mentioned users), never for its own writer; opening the thread reads them.
"""

from __future__ import annotations

import re

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from annotator.models import Caption, CaptionTask, Comment, CommentNotice, Pair
from subtlebench.errors import Conflict, Forbidden, Invalid, NotFound
from subtlebench.roles import REVIEWER, has_role
from subtlebench.text import NOTE_MAX

MENTION = re.compile(r"(?<![\w@])@([\w.+-]+)")
FIXED_TEXT = "Fixed, please look again."
UNREAD_SHOWN = 8  # items in the home page's list; the count covers all


def item_field(item) -> str:
    if isinstance(item, Pair):
        return "pair"
    if isinstance(item, Caption):
        return "caption"
    raise TypeError(f"a conversation is on a pair or a caption, not {type(item).__name__}")


def item_label(item) -> str:
    """The item as people name it: its kind, what it is about and its author."""
    if isinstance(item, Pair):
        return f"{item.category} pair {item.pk}"
    return f"caption {item.pk} of pair {item.pair_id}"


def item_load(kind: str, item_id: int):
    """The pair or caption by kind ('pair' or 'caption') and id; NotFound otherwise."""
    model = {"pair": Pair, "caption": Caption}.get(kind)
    item = model.objects.select_related("author").filter(pk=item_id).first() if model else None
    if item is None:
        raise NotFound(f"There is no {kind} {item_id}.")
    return item


def thread_comments(item):
    return Comment.objects.filter(**{item_field(item): item}).select_related("author", "resolved_by")


def may_talk(item, user) -> bool:
    if item.author_id == user.pk or has_role(user, REVIEWER):
        return True
    return CommentNotice.objects.filter(user=user, **{f"comment__{item_field(item)}": item}).exists()


def thread_check(item, user) -> None:
    if not may_talk(item, user):
        raise Forbidden(f"The conversation on {item_label(item)} is its author's and the reviewers'.")


def mentioned_users(body: str) -> list:
    names = {name.rstrip(".") for name in MENTION.findall(body)}
    if not names:
        return []
    return list(get_user_model().objects.filter(username__in=names, is_active=True).order_by("pk"))


def _post(item, *, author, body: str, kind: str) -> Comment:
    body = (body or "").strip()
    if not body:
        raise Invalid({"body": ["Write something to post."]})
    if len(body) > NOTE_MAX:
        raise Invalid({"body": [f"A comment is at most {NOTE_MAX} characters; this one has {len(body)}."]})
    field = item_field(item)
    comment = Comment(**{field: item}, author=author, body=body, kind=kind)
    comment.full_clean()
    comment.save()
    mentioned = {user.pk for user in mentioned_users(body)}
    concerned = set(Comment.objects.filter(**{field: item}).values_list("author_id", flat=True))
    if item.author_id:
        concerned.add(item.author_id)
    concerned |= mentioned
    concerned.discard(author.pk)
    CommentNotice.objects.bulk_create(
        [CommentNotice(comment=comment, user_id=pk, mentioned=pk in mentioned) for pk in sorted(concerned)]
    )
    return comment


def comment_post(*, item, author, body: str) -> Comment:
    """Post a comment on the item's thread; users @mentioned are told (and may then read and answer)."""
    thread_check(item, author)
    with transaction.atomic():
        return _post(item, author=author, body=body, kind=Comment.Kind.COMMENT)


def comment_rejection(*, item, reviewer, reason: str) -> Comment:
    """The rejection's reason as the thread's next message (the first, on a new thread). Inside the review's
    transaction."""
    return _post(item, author=reviewer, body=reason, kind=Comment.Kind.REJECTION)


def comment_resolve(*, comment_id: int, user, resolved: bool = True) -> Comment:
    """Mark a comment settled (or open again): its item's author, reviewers and coordinators may."""
    comment = Comment.objects.select_related("pair", "caption").filter(pk=comment_id).first()
    if comment is None:
        raise NotFound(f"There is no comment {comment_id}.")
    thread_check(comment.pair or comment.caption, user)
    comment.resolved = timezone.now() if resolved else None
    comment.resolved_by = user if resolved else None
    comment.save(update_fields=["resolved", "resolved_by"])
    return comment


def item_fixed(*, item, user, body: str = "") -> Comment:
    """The author says a rejected item is fixed: it goes back to review, and the thread says so (the reviewers who
    wrote in it are told)."""
    if item.author_id != user.pk:
        raise Forbidden(f"Only the author of {item_label(item)} can send it back to review.")
    with transaction.atomic():
        model = type(item)
        locked = model.objects.select_for_update().get(pk=item.pk)
        if locked.status != model.Status.REJECTED:
            raise Conflict(
                f"{item_label(locked).capitalize()} is {locked.status}: only a rejected one goes back to review."
            )
        if isinstance(locked, Caption) and locked.task_id:
            # Its task reopened for another caption at the rejection: this one takes the slot back if nobody wrote one.
            CaptionTask.objects.filter(pk=locked.task_id, status=CaptionTask.Status.OPEN, caption__isnull=True).free(
                timezone.now()
            ).update(status=CaptionTask.Status.DONE, caption=locked)
        locked.status, locked.decided_at = model.Status.SUBMITTED, None
        if isinstance(locked, Pair):
            locked.submitted_at = timezone.now()
        locked.save()
        item.status = locked.status
        return _post(locked, author=user, body=body.strip() or FIXED_TEXT, kind=Comment.Kind.FIXED)


def thread_read(*, item, user) -> int:
    """The user opened the thread: their notices on it are read. How many were new."""
    return CommentNotice.objects.filter(user=user, read__isnull=True, **{f"comment__{item_field(item)}": item}).update(
        read=timezone.now()
    )


def thread_context(item, user) -> dict:
    """What the thread partial shows: the comments, which are new to this user (read as it is shown), and what the
    user may do."""
    comments = list(thread_comments(item))
    new = set(
        CommentNotice.objects.filter(user=user, read__isnull=True, comment__in=comments).values_list(
            "comment_id", flat=True
        )
    )
    thread_read(item=item, user=user)
    kind = item_field(item)
    return {
        "kind": kind,
        "item": item,
        "label": item_label(item),
        "comments": comments,
        "new": new,
        "may_fix": item.author_id == user.pk and item.status == type(item).Status.REJECTED,
        "limit": NOTE_MAX,
    }


def unread_comments_for(user) -> dict:
    """The home page's "N new comments": how many unread comments the user has, and the items they are on (newest
    first, at most UNREAD_SHOWN), each {label, url, count, mentioned, last}."""
    notices = CommentNotice.objects.filter(user=user, read__isnull=True)
    total = notices.count()
    items = []
    if total:
        rows = (
            notices.values("comment__pair", "comment__caption")
            .annotate(count=Count("pk"), last=Max("comment__created"), mentions=Count("pk", filter=_mentioned()))
            .order_by("-last", "comment__pair", "comment__caption")[:UNREAD_SHOWN]
        )
        pairs = Pair.objects.in_bulk([row["comment__pair"] for row in rows if row["comment__pair"]])
        captions = Caption.objects.in_bulk([row["comment__caption"] for row in rows if row["comment__caption"]])
        for row in rows:
            item = pairs.get(row["comment__pair"]) or captions.get(row["comment__caption"])
            if item is None:
                continue
            items.append(
                {
                    "label": item_label(item),
                    "url": item_url(item, user),
                    "count": row["count"],
                    "mentioned": bool(row["mentions"]),
                    "last": row["last"],
                }
            )
    return {"total": total, "items": items}


def _mentioned():
    return Q(mentioned=True)


def item_url(item, user) -> str:
    """Where the user reads the thread: the review page for reviewers, the workbench of the item for its author."""
    if isinstance(item, Pair):
        if item.author_id == user.pk or not has_role(user, REVIEWER):
            if item.video_id:
                return f"/work/videos/{item.video_id}/?pair={item.pk}"
            candidate = item.candidates.values_list("pk", flat=True).first() if hasattr(item, "candidates") else None
            if candidate:
                return f"/work/candidates/{candidate}/?pair={item.pk}"
        return f"/review/pairs/{item.pk}/"
    if item.author_id == user.pk and item.task_id:
        return f"/captions/tasks/{item.task_id}/"
    return f"/captions/review/?caption={item.pk}"
