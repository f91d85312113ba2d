"""MessageSelector: what a consumer subscribes to, a tag expression or an SQL92 expression (MessageSelector.java)."""

from __future__ import annotations

from dataclasses import dataclass


class ExpressionType:
    TAG = "TAG"
    SQL92 = "SQL92"

    @staticmethod
    def is_tag_type(expression_type: str | None) -> bool:
        """``ExpressionType.isTagType``: None, empty and ``TAG`` are tag expressions."""
        return expression_type is None or expression_type == "" or expression_type == ExpressionType.TAG


SUB_ALL = "*"


@dataclass(frozen=True)
class MessageSelector:
    expression_type: str
    expression: str

    @classmethod
    def by_tag(cls, expression: str | None) -> MessageSelector:
        """``"TagA || TagB"``; None, "" and ``"*"`` select everything."""
        return cls(ExpressionType.TAG, expression.strip() if expression and expression.strip() else SUB_ALL)

    @classmethod
    def by_sql(cls, expression: str) -> MessageSelector:
        if not expression or not expression.strip():
            raise ValueError("an SQL92 selector needs an expression")
        return cls(ExpressionType.SQL92, expression)

    @property
    def selects_all(self) -> bool:
        return self.expression_type == ExpressionType.TAG and self.expression == SUB_ALL
