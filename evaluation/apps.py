from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"

    def ready(self):
        from evaluation.pair_filters import register

        register()
