"""Conversation API: the comments on a pair or a caption (read, post, resolve) and the author's "fixed, please
look again". Thin views over annotator.conversations.services, the same services the pages call."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotator.conversations import services as talk
from api.errors import error_responses
from api.fields import free_text, yes_no
from subtlebench.roles import ANNOTATOR, COORDINATOR, REVIEWER, HasRole
from subtlebench.text import NOTE_MAX

TALK = HasRole.of(ANNOTATOR, REVIEWER, COORDINATOR)


class CommentSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    author = serializers.CharField(source="author.username")
    kind = serializers.CharField(help_text="comment, rejection (the reviewer's reason) or fixed (back to review).")
    body = serializers.CharField()
    created = serializers.DateTimeField()
    resolved = serializers.DateTimeField(allow_null=True)


class ThreadSerializer(serializers.Serializer):
    item = serializers.CharField(help_text="The pair or caption, as people name it.")
    status = serializers.CharField(help_text="The item's status now.")
    comments = CommentSerializer(many=True)


class CommentInputSerializer(serializers.Serializer):
    body = free_text(NOTE_MAX, help_text="The comment; @username tells that user.")


class FixedInputSerializer(serializers.Serializer):
    body = free_text(NOTE_MAX, required=False, allow_blank=True, default="", help_text="Default: the standard text.")


class ResolveInputSerializer(serializers.Serializer):
    resolved = yes_no(required=False, default=True)


def _thread(kind: str, item_id: int, user):
    item = talk.item_load(kind, item_id)
    talk.thread_check(item, user)
    return item


def _thread_body(item, user) -> dict:
    comments = list(talk.thread_comments(item))
    talk.thread_read(item=item, user=user)
    return ThreadSerializer({"item": talk.item_label(item), "status": item.status, "comments": comments}).data


def _comments(kind: str):
    @extend_schema(methods=["GET"], responses={200: ThreadSerializer, **error_responses(403, 404)})
    @extend_schema(
        methods=["POST"],
        request=CommentInputSerializer,
        responses={201: CommentSerializer, **error_responses(400, 403, 404)},
    )
    @api_view(["GET", "POST"])
    @permission_classes([TALK])
    def comments(request, **ids):
        """The conversation on the item (GET: reading it marks your notices read), or post a comment to it."""
        item = _thread(kind, ids[f"{kind}_id"], request.user)
        if request.method == "GET":
            return Response(_thread_body(item, request.user))
        data = CommentInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        comment = talk.comment_post(item=item, author=request.user, body=data.validated_data["body"])
        return Response(CommentSerializer(comment).data, status=status.HTTP_201_CREATED)

    comments.__name__ = comments.cls.__name__ = f"{kind}_comments"
    return comments


def _fixed(kind: str):
    @extend_schema(
        request=FixedInputSerializer, responses={200: ThreadSerializer, **error_responses(400, 403, 404, 409)}
    )
    @api_view(["POST"])
    @permission_classes([TALK])
    def fixed(request, **ids):
        """The author of a rejected item says it is fixed: it goes back to review, and the thread says so."""
        item = _thread(kind, ids[f"{kind}_id"], request.user)
        data = FixedInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        talk.item_fixed(item=item, user=request.user, body=data.validated_data["body"])
        item.refresh_from_db()
        return Response(_thread_body(item, request.user))

    fixed.__name__ = fixed.cls.__name__ = f"{kind}_fixed"
    return fixed


pair_comments = _comments("pair")
caption_comments = _comments("caption")
pair_fixed = _fixed("pair")
caption_fixed = _fixed("caption")


@extend_schema(request=ResolveInputSerializer, responses={200: CommentSerializer, **error_responses(400, 403, 404)})
@api_view(["POST"])
@permission_classes([TALK])
def comment_resolve(request, comment_id: int):
    """Mark a comment settled (resolved: true) or open again (false)."""
    data = ResolveInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    comment = talk.comment_resolve(comment_id=comment_id, user=request.user, resolved=data.validated_data["resolved"])
    return Response(CommentSerializer(comment).data)
