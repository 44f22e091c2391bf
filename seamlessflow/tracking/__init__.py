"""Experiment tracking from the Kafka records: scalar points, trackers (TensorBoard, W&B, MLflow), the sink."""
