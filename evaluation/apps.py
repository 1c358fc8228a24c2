from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"

    def ready(self):
        from evaluation.pair_filters import register

        register()
        from annotator.releases.services import release_links_register
        from evaluation.release_answers import release_studies_section

        release_links_register(release_studies_section)
        from annotator.modeleval.compare import paired_side_register
        from evaluation.release_answers import human_side

        paired_side_register("humans", "humans (study answers, majority per item)", human_side)

        from annotator.synthetic.services import sweep_series_register
        from evaluation.sweeps import human_series_on_sweep

        sweep_series_register(human_series_on_sweep)
