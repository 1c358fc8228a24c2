from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"
